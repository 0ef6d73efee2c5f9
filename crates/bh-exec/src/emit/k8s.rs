//! A Kubernetes Indexed Job (`batch/v1`): one completion index per plan,
//! `JOB_COMPLETION_INDEX` as `--index`, a per-index retry budget
//! (`backoffLimitPerIndex`, `restartPolicy: Never`), a `podFailurePolicy`
//! that fails an index at once on a permanent exit code (`FailIndex`) and
//! does not count an eviction or preemption (`DisruptionTarget`: `Ignore`).
//! The repository, sessions and plans reach the pods on a
//! PersistentVolumeClaim mounted at the path the plans name (plans pin
//! absolute paths); the provider key from a Secret through `envFrom`; the
//! image is the caller's (one with `bh` and `git`).
//!
//! Own serde structs rather than `k8s-openapi`: the Job needs a dozen
//! types, while `k8s-openapi` compiles every API group of a Kubernetes
//! version (minutes of build and a feature flag per version); the test
//! validates the output against the Kubernetes schema instead
//! (`kubernetes-validate`).

use serde::Serialize;

use super::PERMANENT_EXIT_CODES;

/// What the Job is made of.
#[derive(Debug, Clone)]
pub struct K8sRecipe {
    pub name: String,
    pub image: String,
    /// The manifest (directory or file) as the pods see it.
    pub plans: String,
    pub receipts: String,
    pub count: usize,
    pub parallelism: usize,
    /// Attempts per index (`backoffLimitPerIndex` = attempts − 1).
    pub attempts: u32,
    pub publish: Option<String>,
    pub base_url: Option<String>,
    /// The Secret whose keys become the provider-key variables.
    pub secret: String,
    /// The claim holding repository, sessions and plans, and where it is mounted.
    pub claim: String,
    pub mount: String,
    /// Run each plan in a detached worktree (`--checkout`).
    pub checkout: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: Metadata,
    pub spec: JobSpec,
}

#[derive(Debug, Serialize)]
pub struct Metadata {
    pub name: String,
    pub labels: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    pub completions: usize,
    pub parallelism: usize,
    pub completion_mode: &'static str,
    pub backoff_limit_per_index: u32,
    pub max_failed_indexes: usize,
    pub pod_failure_policy: PodFailurePolicy,
    pub template: PodTemplate,
}

#[derive(Debug, Serialize)]
pub struct PodFailurePolicy {
    pub rules: Vec<PodFailureRule>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodFailureRule {
    pub action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_exit_codes: Option<OnExitCodes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_pod_conditions: Option<Vec<PodCondition>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OnExitCodes {
    pub container_name: &'static str,
    pub operator: &'static str,
    pub values: Vec<u8>,
}

#[derive(Debug, Serialize)]
pub struct PodCondition {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub status: &'static str,
}

#[derive(Debug, Serialize)]
pub struct PodTemplate {
    pub metadata: TemplateMetadata,
    pub spec: PodSpec,
}

#[derive(Debug, Serialize)]
pub struct TemplateMetadata {
    pub labels: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    pub restart_policy: &'static str,
    pub containers: Vec<Container>,
    pub volumes: Vec<Volume>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    pub name: &'static str,
    pub image: String,
    pub command: Vec<String>,
    pub env: Vec<EnvVar>,
    pub env_from: Vec<EnvFrom>,
    pub volume_mounts: Vec<VolumeMount>,
}

#[derive(Debug, Serialize)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvFrom {
    pub secret_ref: SecretRef,
}

#[derive(Debug, Serialize)]
pub struct SecretRef {
    pub name: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    pub name: &'static str,
    pub mount_path: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    pub name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<ClaimSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<EmptyDir>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimSource {
    pub claim_name: String,
}

#[derive(Debug, Serialize)]
pub struct EmptyDir {}

/// The container's command: static, the values come from the env (no
/// quoting of paths into a shell line).
const RUN: &str = "exec bh exec run --plans \"$BH_PLANS\" --index \"$JOB_COMPLETION_INDEX\" \
--yes --trust-plan --receipts \"$BH_RECEIPTS\" \
${BH_PUBLISH:+--publish \"$BH_PUBLISH\"} ${BH_BASE_URL:+--base-url \"$BH_BASE_URL\"} \
${BH_CHECKOUT:+--checkout}";

/// The Job.
pub fn job(r: &K8sRecipe) -> Job {
    let labels: std::collections::BTreeMap<String, String> = [(
        "app.kubernetes.io/name".to_owned(),
        "bh-exec-batch".to_owned(),
    )]
    .into();
    let mut env = vec![
        EnvVar {
            name: "BH_PLANS".into(),
            value: r.plans.clone(),
        },
        EnvVar {
            name: "BH_RECEIPTS".into(),
            value: r.receipts.clone(),
        },
        // The pod's own state dir (its plan key is not the planner's:
        // --trust-plan re-checks every field before it runs).
        EnvVar {
            name: "BH_STATE_DIR".into(),
            value: "/var/lib/bh-state".into(),
        },
    ];
    if let Some(p) = &r.publish {
        env.push(EnvVar {
            name: "BH_PUBLISH".into(),
            value: p.clone(),
        });
    }
    if let Some(u) = &r.base_url {
        env.push(EnvVar {
            name: "BH_BASE_URL".into(),
            value: u.clone(),
        });
    }
    if r.checkout {
        env.push(EnvVar {
            name: "BH_CHECKOUT".into(),
            value: "1".into(),
        });
    }
    Job {
        api_version: "batch/v1",
        kind: "Job",
        metadata: Metadata {
            name: r.name.clone(),
            labels: labels.clone(),
        },
        spec: JobSpec {
            completions: r.count,
            parallelism: r.parallelism.max(1),
            completion_mode: "Indexed",
            backoff_limit_per_index: r.attempts.saturating_sub(1),
            max_failed_indexes: r.count,
            pod_failure_policy: PodFailurePolicy {
                rules: vec![
                    PodFailureRule {
                        action: "FailIndex",
                        on_exit_codes: Some(OnExitCodes {
                            container_name: "bh",
                            operator: "In",
                            values: PERMANENT_EXIT_CODES.to_vec(),
                        }),
                        on_pod_conditions: None,
                    },
                    PodFailureRule {
                        action: "Ignore",
                        on_exit_codes: None,
                        on_pod_conditions: Some(vec![PodCondition {
                            kind: "DisruptionTarget",
                            status: "True",
                        }]),
                    },
                ],
            },
            template: PodTemplate {
                metadata: TemplateMetadata { labels },
                spec: PodSpec {
                    restart_policy: "Never",
                    containers: vec![Container {
                        name: "bh",
                        image: r.image.clone(),
                        command: vec!["sh".into(), "-c".into(), RUN.into()],
                        env,
                        env_from: vec![EnvFrom {
                            secret_ref: SecretRef {
                                name: r.secret.clone(),
                            },
                        }],
                        volume_mounts: vec![
                            VolumeMount {
                                name: "work",
                                mount_path: r.mount.clone(),
                            },
                            VolumeMount {
                                name: "state",
                                mount_path: "/var/lib/bh-state".into(),
                            },
                        ],
                    }],
                    volumes: vec![
                        Volume {
                            name: "work",
                            persistent_volume_claim: Some(ClaimSource {
                                claim_name: r.claim.clone(),
                            }),
                            empty_dir: None,
                        },
                        Volume {
                            name: "state",
                            persistent_volume_claim: None,
                            empty_dir: Some(EmptyDir {}),
                        },
                    ],
                },
            },
        },
    }
}
