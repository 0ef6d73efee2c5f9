// Better Harness for Pi (1.6.x and 0.73.1). As thin as possible: every
// checkpoint, rewind, worktree and execution decision is made by `bh`; this
// file only maps Pi events and commands onto `bh checkpoint serve` (one child
// per session runtime, JSON lines on stdio, see crates/bh-serve/PROTOCOL.md)
// and onto `bh` commands. No imports from Pi itself, so one file serves both
// package names (@earendil-works/… and @mariozechner/…).
//
// Settings (environment):
//   BH_BIN                      the bh executable (default: `bh` on PATH)
//   BH_PI_CHECKPOINT_TOOLS      extra tool names to checkpoint before (comma-separated)
//   BH_PI_REWIND                `files` or `conversation`: what /tree and /fork
//                               rewind when there is no UI to ask (default: conversation)
import { spawn, execFile } from "node:child_process";
import { existsSync, realpathSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createHash } from "node:crypto";
import { join } from "node:path";

type Json = any;

const BH = process.env.BH_BIN || "bh";
const MUTATING = new Set(
	["edit", "write", "bash"].concat(
		(process.env.BH_PI_CHECKPOINT_TOOLS || "")
			.split(",")
			.map((s) => s.trim())
			.filter(Boolean),
	),
);
const FILES = "Conversation and files";
const CONVERSATION = "Conversation only";

/** Whether `dir` is `root` or lies below it (real paths: symlinks resolved). */
function inside(dir: string, root: string): boolean {
	const real = (p: string) => {
		try {
			return realpathSync(p);
		} catch {
			return p;
		}
	};
	const d = real(dir);
	const r = real(root);
	return d === r || d.startsWith(r.endsWith("/") ? r : `${r}/`);
}

/** One `bh checkpoint serve` child speaking JSON lines. */
class Server {
	private child: any;
	private buf = "";
	private next = 1;
	private waiting = new Map<number, (v: Json) => void>();
	private dead: string | null = null;

	constructor(cwd: string) {
		this.child = spawn(BH, ["checkpoint", "serve"], { cwd, stdio: ["pipe", "pipe", "pipe"] });
		this.child.on("error", (e: Error) => this.fail(`cannot run ${BH}: ${e.message}`));
		this.child.on("exit", (code: number | null) => this.fail(`bh checkpoint serve exited (${code})`));
		this.child.stdin.on("error", () => {});
		let err = "";
		this.child.stderr.on("data", (d: Buffer) => {
			err = (err + d.toString()).slice(-2000);
		});
		this.child.on("close", () => {
			if (err.trim()) this.dead = `${this.dead ?? "bh checkpoint serve stopped"}: ${err.trim()}`;
		});
		this.child.stdout.on("data", (d: Buffer) => {
			this.buf += d.toString("utf8");
			let nl: number;
			while ((nl = this.buf.indexOf("\n")) >= 0) {
				const line = this.buf.slice(0, nl);
				this.buf = this.buf.slice(nl + 1);
				let v: Json;
				try {
					v = JSON.parse(line);
				} catch {
					continue;
				}
				const done = this.waiting.get(v.id);
				if (done) {
					this.waiting.delete(v.id);
					done(v);
				}
			}
		});
	}

	private fail(why: string) {
		this.dead = this.dead ?? why;
		for (const [, done] of this.waiting) done({ error: { kind: "internal", message: why } });
		this.waiting.clear();
	}

	/** Sends one request; resolves with `ok`, rejects with the error message. */
	request(op: string, fields: Json = {}): Promise<Json> {
		if (this.dead) return Promise.reject(new Error(this.dead));
		const id = this.next++;
		return new Promise((resolve, reject) => {
			this.waiting.set(id, (v: Json) =>
				v.error ? reject(new Error(`${v.error.kind}: ${v.error.message}`)) : resolve(v.ok),
			);
			this.child.stdin.write(JSON.stringify({ id, op, ...fields }) + "\n");
		});
	}

	get alive(): boolean {
		return this.dead === null;
	}

	close() {
		try {
			this.child.stdin.end();
		} catch {}
	}
}

/** Runs `bh --json ARGS` in `cwd`; resolves with its JSON document. */
function bh(args: string[], cwd: string): Promise<Json> {
	return new Promise((resolve, reject) => {
		execFile(BH, ["--json", ...args], { cwd, maxBuffer: 64 << 20 }, (err: any, stdout: string, stderr: string) => {
			let doc: Json = null;
			try {
				doc = JSON.parse(stdout);
			} catch {}
			if (doc?.error) return reject(new Error(`${doc.error.kind}: ${doc.error.message}`));
			if (err && !doc) return reject(new Error((stderr || String(err)).trim()));
			resolve(doc);
		});
	});
}

function words(args: string): string[] {
	return (args || "").trim().split(/\s+/).filter(Boolean);
}

function say(ctx: Json, text: string, level: "info" | "warning" | "error" = "info") {
	if (ctx?.hasUI) ctx.ui.notify(text, level);
	else process.stderr.write(`[better-harness] ${text}\n`);
}

export default function betterHarness(pi: Json) {
	let server: Server | null = null;
	let last: Json = null; // the checkpoint before the last mutating call
	// Calls between their checkpoint and their result: tool-call id -> what
	// the after-record needs.
	const pending = new Map<string, { before: string; entry: string; tool: string }>();
	// How many /undo steps back from the newest call (reset by a new call).
	let undoDepth = 0;
	// Said after Pi's own tree navigation (its "Navigated to …" notice would
	// cover a notice sent before it), and whether files went with it.
	let afterTree: { text: string; level: "info" | "warning" | "error" } | null = null;
	let rewoundTo: string | null = null;

	const ensure = (ctx: Json): Server => {
		// (Re)start the child when there is none or it died.
		if (!server || !server.alive) {
			server?.close();
			server = new Server(ctx.cwd);
		}
		return server;
	};

	pi.on("session_start", async (_event: Json, ctx: Json) => {
		ensure(ctx);
		// A session prepared by `bh worktree enter`: consume its handoff once.
		const file = ctx.sessionManager.getSessionFile?.();
		// A new session's file does not exist yet (Pi writes it lazily); a
		// prepared one always does.
		if (!file || !existsSync(file)) return;
		try {
			const out = await bh(["worktree", "consume", file], ctx.cwd);
			if (out?.status === "verified") say(ctx, `arrived in worktree ${ctx.cwd} (handoff consumed)`);
			else if (out?.status === "caveat")
				say(ctx, `worktree arrival NOT as planned: ${(out.problems || []).join("; ")}`, "warning");
			else if (out?.status === "foreign")
				say(ctx, `ignored ${out.record}: not a handoff record bh wrote (${out.reason})`, "warning");
		} catch (e: any) {
			say(ctx, `bh worktree consume failed: ${e.message}`, "warning");
		}
	});

	pi.on("session_shutdown", async () => {
		server?.close();
		server = null;
	});

	pi.on("tool_call", async (event: Json, ctx: Json) => {
		if (!MUTATING.has(event.toolName)) return;
		const sm = ctx.sessionManager;
		// The assistant entry that made this call (the leaf once Pi has stored it).
		const entry = sm.getBranch().findLast?.((e: Json) =>
			e.type === "message" && e.message?.role === "assistant" &&
			(e.message.content || []).some((c: Json) => c.type === "toolCall" && c.id === event.toolCallId),
		)?.id ?? sm.getLeafId();
		try {
			const ok = await ensure(ctx).request("snapshot", {
				tool: event.toolName,
				session: sm.getSessionId(),
				entry,
			});
			last = ok.snapshot.checkpoint;
			undoDepth = 0;
			pending.set(event.toolCallId, { before: last.commit, entry, tool: event.toolName });
		} catch (e: any) {
			// Never block the tool: a visible warning only.
			say(ctx, `checkpoint before ${event.toolName} failed: ${e.message}`, "warning");
		}
		return undefined;
	});

	// What the call changed: the state after it, tied to its checkpoint
	// before (what a rewind attributes to the session, bash included).
	pi.on("tool_result", async (event: Json, ctx: Json) => {
		const p = pending.get(event.toolCallId);
		if (!p) return undefined;
		pending.delete(event.toolCallId);
		try {
			await ensure(ctx).request("after", {
				tool: p.tool,
				session: ctx.sessionManager.getSessionId(),
				entry: p.entry,
				call: event.toolCallId,
				before: p.before,
			});
		} catch (e: any) {
			say(ctx, `after-record of ${p.tool} failed (a rewind will attribute it approximately): ${e.message}`, "warning");
		}
		return undefined;
	});

	/** Asks (or reads the setting) whether files rewind too; null = cancel. */
	const wantFiles = async (ctx: Json, what: string): Promise<boolean | null> => {
		if (!ctx.hasUI) return (process.env.BH_PI_REWIND || "conversation") === "files";
		const choice = await ctx.ui.select(`${what}: rewind what?`, [FILES, CONVERSATION]);
		if (choice === undefined) return null;
		return choice === FILES;
	};

	/** Reverts what the session's own calls after `entry` changed (`bh
	 * rewind --files-only`: paths nobody in the session touched stay, a path
	 * changed by someone else since is a conflict, asked about or refused);
	 * false when nothing may change. A session without a file (Pi's
	 * `--no-session`) falls back to the whole-tree restore of its checkpoint. */
	const rewindFiles = async (ctx: Json, entry: string, branch: string[]): Promise<boolean> => {
		const file = ctx.sessionManager.getSessionFile?.();
		if (!file || !existsSync(file)) return exactRewind(ctx, entry, branch);
		const args = ["rewind", "--session", file, "--entry", entry, "--files-only"];
		try {
			const plan = await bh([...args, "--dry-run"], ctx.cwd);
			if (!plan?.rewind) {
				afterTree = { text: "files unchanged: no mutating tool call after that entry", level: "info" };
				return true;
			}
			const conflicts: Json[] = plan.rewind.plan.conflicts || [];
			let force = false;
			if (conflicts.length) {
				const list = conflicts.map((c: Json) => `${c.path} (${c.reason})`).join(", ");
				if (!ctx.hasUI) {
					say(ctx, `files NOT rewound: changed since by someone else: ${list}; navigation cancelled (bh rewind --force PATH takes one)`, "error");
					return false;
				}
				const choice = await ctx.ui.select(`Changed since by someone else: ${list}`, ["Overwrite them", "Cancel"]);
				if (choice !== "Overwrite them") return false;
				force = true;
			}
			const done = await bh(force ? [...args, "--force"] : args, ctx.cwd);
			const p = done.rewind.plan;
			const leftAlone = p.left_alone?.length ? `; left alone (not the session's): ${p.left_alone.join(", ")}` : "";
			const approx = p.approximate ? ` (${p.approximate})` : "";
			afterTree = {
				text: `files rewound: ${p.revert.length} reverted, ${p.delete.length} deleted${leftAlone}${approx}; undo with: /redo`,
				level: "info",
			};
			return true;
		} catch (e: any) {
			say(ctx, `files NOT rewound (${e.message}); navigation cancelled, nothing changed`, "error");
			return false;
		}
	};

	/** The whole-tree restore of the checkpoint before the first call after `entry`. */
	const exactRewind = async (ctx: Json, entry: string, branch: string[]): Promise<boolean> => {
		try {
			const ok = await ensure(ctx).request("restore_to_entry", {
				session: ctx.sessionManager.getSessionId(),
				entry,
				branch,
				exact: true,
			});
			if (!ok.restore) {
				afterTree = { text: "files unchanged: no mutating tool call after that entry", level: "info" };
				return true;
			}
			const r = ok.restore;
			afterTree = {
				text: `files rewound to checkpoint ${ok.checkpoint.id} (${r.restored.length} written, ${r.deleted.length} deleted); undo with: /restore ${r.safety.id} --exact`,
				level: "info",
			};
			return true;
		} catch (e: any) {
			say(ctx, `files NOT rewound (${e.message}); navigation cancelled, nothing changed`, "error");
			return false;
		}
	};

	pi.on("session_before_tree", async (event: Json, ctx: Json) => {
		const { targetId, oldLeafId } = event.preparation;
		const branch = ctx.sessionManager.getBranch(oldLeafId ?? undefined).map((e: Json) => e.id);
		if (!branch.includes(targetId)) return; // another branch: conversation only
		const files = await wantFiles(ctx, "/tree");
		if (files === null) return { cancel: true };
		if (files && !(await rewindFiles(ctx, targetId, branch))) return { cancel: true };
		rewoundTo = files ? targetId : null;
	});

	// After Pi's own navigation: the notice (visible now, after Pi's), and a
	// rewound leaf made the file's last entry, so `pi --continue` reopens
	// there and not at the leaf the files were rewound from.
	pi.on("session_tree", async (event: Json, ctx: Json) => {
		if (rewoundTo !== null && event.newLeafId) {
			try {
				pi.appendEntry("better-harness.set-leaf", { targetId: event.newLeafId });
			} catch (e: any) {
				say(ctx, `the rewound leaf is not saved for pi --continue: ${e.message}`, "warning");
			}
		}
		rewoundTo = null;
		// Pi's TUI clears its chat and shows "Navigated to selected point"
		// after this event returns (in the same run of its event loop): said
		// on the next turn, the notice lands after Pi's and stays on screen.
		// Without a UI (print mode) it is said now: Pi may be done, and its
		// ctx stale, by the next turn.
		const notice = afterTree;
		afterTree = null;
		if (!notice) return;
		if (!ctx?.hasUI) return say(ctx, notice.text, notice.level);
		const ui = ctx.ui;
		setTimeout(() => {
			try {
				ui.notify(notice.text, notice.level);
			} catch {
				process.stderr.write(`[better-harness] ${notice.text}\n`);
			}
		}, 0);
	});

	pi.on("session_before_fork", async (event: Json, ctx: Json) => {
		const branch = ctx.sessionManager.getBranch().map((e: Json) => e.id);
		if (!branch.includes(event.entryId)) return;
		const files = await wantFiles(ctx, event.position === "at" ? "/clone" : "/fork");
		if (files === null) return { cancel: true };
		if (files && !(await rewindFiles(ctx, event.entryId, branch))) return { cancel: true };
		// A fork has no session_tree event: say it now.
		if (afterTree) say(ctx, afterTree.text, afterTree.level);
		afterTree = null;
	});

	pi.registerCommand("checkpoints", {
		description: "List this project's checkpoints (Better Harness)",
		handler: async (args: string, ctx: Json) => {
			try {
				const all = words(args).includes("--all");
				const ok = await ensure(ctx).request(
					"list",
					all ? {} : { session: ctx.sessionManager.getSessionId() },
				);
				// The states before the calls (restore points); the after-states
				// are what rewinds attribute with, listed by `bh checkpoint list`.
				const lines = ok.checkpoints.filter((c: Json) => c.kind !== "after").map(
					(c: Json) =>
						`${c.id}  ${new Date(c.time_ms).toISOString()}  ${c.tool}${c.entry ? `  entry ${c.entry}` : ""}${c.kind !== "snapshot" ? `  (${c.kind})` : ""}`,
				);
				say(ctx, lines.length ? lines.join("\n") : "no checkpoints (use /checkpoints --all for other sessions')");
			} catch (e: any) {
				say(ctx, `cannot list checkpoints: ${e.message}`, "error");
			}
		},
	});

	const restore = async (ctx: Json, checkpoint: string, paths: string[], exact: boolean) => {
		const ok = await ensure(ctx).request("restore", { checkpoint, paths, exact, cwd: ctx.cwd });
		const r = ok.restore;
		say(
			ctx,
			`restored ${r.checkpoint.id}: ${r.restored.length} written, ${r.deleted.length} deleted; undo with: /restore ${r.safety.id} --exact`,
		);
	};

	pi.registerCommand("restore", {
		description: "Restore files from a checkpoint: /restore ID [--exact] [PATH…]",
		handler: async (args: string, ctx: Json) => {
			const w = words(args);
			const exact = w.includes("--exact");
			const [id, ...paths] = w.filter((x) => x !== "--exact");
			if (!id) return say(ctx, "usage: /restore ID [--exact] [PATH…]", "warning");
			try {
				await restore(ctx, id, paths, exact);
			} catch (e: any) {
				say(ctx, `restore failed: ${e.message}`, "error");
			}
		},
	});

	pi.registerCommand("undo", {
		description: "Put the files back as they were before the last mutating tool call; again: one call further back",
		handler: async (_args: string, ctx: Json) => {
			try {
				// The session's checkpoints before its calls, newest first.
				const ok = await ensure(ctx).request("list", { session: ctx.sessionManager.getSessionId() });
				const befores: Json[] = ok.checkpoints.filter((c: Json) => c.kind === "snapshot");
				const target = befores[undoDepth] ?? (undoDepth === 0 ? last : null);
				if (!target)
					return say(ctx, undoDepth ? "nothing further back to undo" : "nothing to undo: no checkpoint in this session", "warning");
				await restore(ctx, target.commit, [], true);
				undoDepth += 1;
			} catch (e: any) {
				say(ctx, `undo failed: ${e.message}`, "error");
			}
		},
	});

	pi.registerCommand("redo", {
		description: "Undo the last rewind: the files as they were before it (bh rewind --undo)",
		handler: async (_args: string, ctx: Json) => {
			try {
				const out = await bh(["rewind", "--undo"], ctx.cwd);
				const r = out?.undo?.restore;
				const n = r ? `${r.restored.length} written, ${r.deleted.length} deleted` : "it had changed no file";
				say(ctx, `rewind undone: ${n}; /tree goes back to the entry you left`);
			} catch (e: any) {
				say(ctx, `redo failed: ${e.message}`, "error");
			}
		},
	});

	pi.registerCommand("worktree", {
		description: "Managed worktrees: /worktree create NAME [bh options] | enter NAME | leave | dispose NAME [--force] | list",
		handler: async (args: string, ctx: Json) => {
			const [sub, ...rest] = words(args);
			const file = ctx.sessionManager.getSessionFile?.();
			try {
				if (sub === "list") {
					const out = await bh(["worktree", "list"], ctx.cwd);
					const lines = (out?.worktrees || []).map(
						(w: Json) =>
							`${w.main ? "(main)" : (w.name ?? "(unmanaged)")}  ${w.branch ?? "(detached)"}  ${w.state ?? "-"}${w.dirty ? `  ${w.dirty} dirty` : ""}  ${w.path}`,
					);
					return say(ctx, lines.join("\n") || "no worktrees");
				}
				if (sub === "create" && rest.length) {
					const extra = file ? ["--session", file] : [];
					const out = await bh(["worktree", "create", ...rest, ...extra], ctx.cwd);
					return say(ctx, `worktree ${rest[0]} created at ${out?.worktree?.path ?? "?"} (/worktree enter ${rest[0]} moves this session there)`);
				}
				if (sub === "dispose" && rest.length) {
					// Never the worktree this Pi runs in: its files would go from
					// under the session (bh decides which one that is).
					const here = await bh(["worktree", "list"], ctx.cwd);
					const named = (here?.worktrees || []).find((w: Json) => w.name === rest[0]);
					if (named && inside(ctx.cwd, named.path)) {
						return say(
							ctx,
							`this session runs in worktree ${rest[0]} (${named.path}): /worktree leave moves it back to the main checkout, then /worktree dispose ${rest[0]}`,
							"warning",
						);
					}
					const out = await bh(["worktree", "dispose", ...rest], ctx.cwd);
					const kept = out?.branch_kept ?? out?.branchKept;
					return say(
						ctx,
						`worktree ${rest[0]} disposed${out?.checkpoint?.id ? ` (checkpoint ${out.checkpoint.id})` : ""}${kept ? `; branch kept: ${kept}` : ""}`,
					);
				}
				if (sub === "leave" && rest.length === 0) {
					if (!file) return say(ctx, "/worktree leave needs a saved session", "warning");
					await ctx.waitForIdle?.();
					const leaf = ctx.sessionManager.getLeafId();
					const out = await bh(["worktree", "leave", "--session", file, ...(leaf ? ["--entry", leaf] : [])], ctx.cwd);
					const result = await ctx.switchSession(out.target);
					if (result?.cancelled) say(ctx, `move cancelled; still in ${ctx.cwd} (prepared session ${out.target} left unused)`, "warning");
					return;
				}
				if (sub === "enter" && rest.length === 1) {
					if (!file) return say(ctx, "/worktree enter needs a saved session", "warning");
					await ctx.waitForIdle?.();
					const leaf = ctx.sessionManager.getLeafId();
					const out = await bh(
						["worktree", "enter", rest[0], "--session", file, ...(leaf ? ["--entry", leaf] : [])],
						ctx.cwd,
					);
					const target = out.target;
					// The new runtime's session_start consumes the handoff.
					const result = await ctx.switchSession(target);
					if (result?.cancelled) say(ctx, `move cancelled; still in ${ctx.cwd} (prepared session ${target} left unused)`, "warning");
					return;
				}
				say(ctx, "usage: /worktree create NAME | enter NAME | leave | dispose NAME [--force] | list", "warning");
			} catch (e: any) {
				say(ctx, `/worktree ${sub ?? ""} failed: ${e.message}`, "error");
			}
		},
	});

	pi.registerCommand("exec", {
		description: "Plan an execution from the current entry at HEAD, then run it after confirmation: /exec [--yes] [PROMPT]",
		handler: async (args: string, ctx: Json) => {
			const file = ctx.sessionManager.getSessionFile?.();
			if (!file) return say(ctx, "/exec needs a saved session", "warning");
			await ctx.waitForIdle?.();
			let prompt = (args || "").trim();
			const yes = /^--yes(\s|$)/.test(prompt);
			if (yes) prompt = prompt.slice(5).trim();
			if (!prompt && ctx.hasUI) prompt = (await ctx.ui.input("Prompt for the execution", "")) || "";
			if (!prompt) return say(ctx, "usage: /exec PROMPT", "warning");
			const leaf = ctx.sessionManager.getLeafId();
			const model = ctx.model ? [`--model`, `${ctx.model.provider}/${ctx.model.id}`] : [];
			// A private folder (0700, unpredictable name), not a guessable
			// path in $TMPDIR another process could plant first.
			const dir = await mkdtemp(join(require_tmp(), "bh-exec-"));
			const plan = join(dir, "plan.json");
			try {
				const planned = await bh(
					// `--prompt=…`: a prompt beginning with `-` is not an option.
					["exec", "plan", "--repo", ctx.cwd, "--base", "HEAD", "--session", file, "--entry", leaf, `--prompt=${prompt}`, ...model, "--out", plan],
					ctx.cwd,
				);
				const p = planned.plan;
				const text: string = p.prompt?.text ?? prompt;
				const sha = createHash("sha256").update(text, "utf8").digest("hex");
				const hidden = countHidden(text);
				const summary =
					`continue entry ${p.session.entry} at ${p.base.commit.slice(0, 12)} with "${reveal(text)}" ` +
					`(${[...text].length} characters, sha256 ${sha.slice(0, 16)}…` +
					(hidden ? `, ${hidden} INVISIBLE character(s) shown as \\u{…}` : "") +
					`) into ${p.output_ref}`;
				const go = yes || (ctx.hasUI ? await ctx.ui.confirm("Run this execution?", summary) : false);
				if (!go) {
					// Cancelled: nothing is left behind (the plan was the only file).
					await rm(dir, { recursive: true, force: true });
					return say(ctx, `execution cancelled, nothing run or written (${summary})`);
				}
				const ran = await bh(["exec", "run", "--plan", plan, "--yes"], ctx.cwd);
				// Gone before the run is reported (the execution keeps its own record).
				await rm(dir, { recursive: true, force: true });
				const r = ran.result;
				const next = r.ref ? `; report: bh exec show ${r.execution_id} --html -o run.html; take it: git merge --ff-only ${r.ref}` : "";
				say(ctx, `execution ${r.state}: commit ${r.commit ?? "-"} on ${r.ref ?? "-"}${next}`);
			} catch (e: any) {
				say(ctx, `/exec failed: ${e.message}`, "error");
			} finally {
				// The execution keeps its own record; the plan file was only the hand-over.
				await rm(dir, { recursive: true, force: true });
			}
		},
	});
}

/** Characters a person would not see (the set of `bh_report::hidden`). */
function isHidden(c: string): boolean {
	const u = c.codePointAt(0) ?? 0;
	if (u < 0x20 || (u >= 0x7f && u <= 0x9f)) return true;
	if ((u & 0xfffe) === 0xfffe || (u >= 0xfdd0 && u <= 0xfdef)) return true;
	const ranges: [number, number][] = [
		[0xad, 0xad], [0x34f, 0x34f], [0x61c, 0x61c], [0x115f, 0x1160], [0x17b4, 0x17b5],
		[0x180b, 0x180f], [0x200b, 0x200f], [0x2028, 0x202e], [0x2060, 0x206f], [0x3164, 0x3164],
		[0xfe00, 0xfe0f], [0xfeff, 0xfeff], [0xffa0, 0xffa0], [0xfff0, 0xfffb], [0x1bca0, 0x1bca3],
		[0x1d173, 0x1d17a], [0xe0000, 0xe0fff], [0xe000, 0xf8ff], [0xf0000, 0x10ffff],
	];
	return ranges.some(([a, b]) => u >= a && u <= b);
}

/** Every character shown: hidden ones (newline and tab too) as `\u{hex}`. */
function reveal(text: string): string {
	return [...text].map((c) => (isHidden(c) ? `\\u{${(c.codePointAt(0) ?? 0).toString(16)}}` : c)).join("");
}

function countHidden(text: string): number {
	return [...text].filter((c) => c !== "\n" && c !== "\t" && isHidden(c)).length;
}

function require_tmp(): string {
	return process.env.TMPDIR || "/tmp";
}
