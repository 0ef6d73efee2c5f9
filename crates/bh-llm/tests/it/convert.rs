//! History conversion: the OpenAI `messages` must equal what real Pi 0.73.1 sent for the
//! same history (recorded by the corpus fake server), and cross-provider histories must
//! be valid for the target wire.

use bh_llm::wire::{anthropic, openai};
use bh_llm::{Api, ChatRequest, Message, ModelSpec};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::{fake_model, fixture, parse_arguments};
use bh_test_support::invariants::{check_anthropic, check_openai};

fn history(name: &str) -> Vec<Message> {
    fixture(&format!("{name}.history.jsonl"))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| Message::from_agent_message(&serde_json::from_str(l).unwrap()).unwrap())
        .collect()
}

fn expected(name: &str) -> Value {
    serde_json::from_str(&fixture(&format!("{name}.expected.json"))).unwrap()
}

fn check_case(name: &str) {
    let model = fake_model("http://127.0.0.1:1");
    let req = ChatRequest {
        messages: history(name).into(),
        ..ChatRequest::default()
    };
    let got = openai::convert_messages(&model, &req);
    let mut exp = expected(name);
    let mut got_cmp = Value::Array(got.clone());
    parse_arguments(&mut got_cmp);
    parse_arguments(&mut exp);
    assert_eq!(got_cmp, exp["messages"], "case {name}");
    check_openai(&json!({"messages": got}));
    let body = openai::build_body(&model, &req);
    assert_eq!(body["max_completion_tokens"], exp["max_completion_tokens"]);
}

#[test]
fn openai_tools_history_matches_pi() {
    check_case("s02-tools");
}

#[test]
fn openai_custom_messages_match_pi() {
    check_case("s07-custom");
}

#[test]
fn openai_images_match_pi() {
    check_case("s12-image");
}

#[test]
fn openai_failed_turns_are_skipped_as_pi() {
    check_case("s09-errors");
}

#[test]
fn tool_specs_match_pi_shape() {
    let exp = expected("s02-tools");
    let tool = &exp["tools"][0];
    let spec = bh_llm::ToolSpec::new(
        tool["function"]["name"].as_str().unwrap().to_owned(),
        tool["function"]["description"].as_str().unwrap().to_owned(),
        &tool["function"]["parameters"],
        false,
    );
    let model = fake_model("http://x");
    let body = openai::build_body(
        &model,
        &ChatRequest {
            tools: vec![spec].into(),
            ..ChatRequest::default()
        },
    );
    assert_eq!(&body["tools"][0], tool);
}

fn claude() -> ModelSpec {
    let mut m = ModelSpec::new("anthropic", "claude-sonnet-4-5", Api::AnthropicMessages);
    m.reasoning = true;
    m
}

#[test]
fn openai_history_to_anthropic() {
    // The s02 history was produced by fake/fake-model on the OpenAI wire: its thinking
    // (signature "reasoning_content") is foreign to Claude and becomes text.
    let req = ChatRequest {
        messages: history("s02-tools").into(),
        ..ChatRequest::default()
    };
    let msgs = anthropic::convert_messages(&claude(), &req);
    check_anthropic(&json!({"messages": msgs}));
    assert_eq!(
        msgs[5]["content"][0],
        json!({"type": "text", "text": "Replace beta with BETA using the edit tool."})
    );
    // parallel results grouped into one user message, last block cached
    let last = msgs.last().unwrap();
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"].as_array().unwrap().len(), 2);
    assert_eq!(
        last["content"][1]["cache_control"],
        json!({"type": "ephemeral"})
    );
}

#[test]
fn foreign_tool_ids_are_normalised_and_results_follow() {
    let a = json!({"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig-from-other"},
        {"type": "toolCall", "id": "call_abc|fc_00+/=xyz", "name": "read", "arguments": {"path": "a"}, "thoughtSignature": "t"},
    ], "api": "openai-responses", "provider": "openai", "model": "gpt-5", "usage": {}, "stopReason": "toolUse", "timestamp": 1});
    let r = json!({"role": "toolResult", "toolCallId": "call_abc|fc_00+/=xyz", "toolName": "read",
        "content": [{"type": "text", "text": "A"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}], "isError": false, "timestamp": 2});
    let messages: Vec<Message> = [
        json!({"role": "user", "content": "go", "timestamp": 0}),
        a,
        r,
    ]
    .iter()
    .map(|v| Message::from_agent_message(v).unwrap().unwrap())
    .collect();
    let req = ChatRequest {
        messages: messages.into(),
        ..ChatRequest::default()
    };
    let msgs = anthropic::convert_messages(&claude(), &req);
    check_anthropic(&json!({"messages": msgs}));
    assert_eq!(msgs[0], json!({"role": "user", "content": "go"}));
    assert_eq!(
        msgs[1]["content"],
        json!([
            {"type": "text", "text": "hmm"},
            {"type": "tool_use", "id": "call_abc_fc_00___xyz", "name": "read", "input": {"path": "a"}},
        ])
    );
    assert_eq!(msgs[2]["content"][0]["tool_use_id"], "call_abc_fc_00___xyz");
    assert_eq!(
        msgs[2]["content"][0]["content"],
        json!([{"type": "text", "text": "A"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}])
    );

    // The same history to an OpenAI-compatible server: `call|item` keeps the call part.
    let oa = openai::convert_messages(&fake_model("http://x"), &req);
    check_openai(&json!({"messages": oa}));
    assert_eq!(oa[1]["tool_calls"][0]["id"], "call_abc");
    assert_eq!(oa[2]["tool_call_id"], "call_abc");
    assert_eq!(oa[1]["content"], "hmm");
    assert!(oa[1].get("reasoning_content").is_none());
}

#[test]
fn orphan_results_are_dropped_and_images_downgraded() {
    let mut model = fake_model("http://x");
    model.input_images = false;
    let messages: Vec<Message> = [
        json!({"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image", "data": "AA", "mimeType": "image/png"}], "timestamp": 0}),
        json!({"role": "toolResult", "toolCallId": "nope", "toolName": "read", "content": [], "isError": false, "timestamp": 1}),
    ]
    .iter()
    .map(|v| Message::from_agent_message(v).unwrap().unwrap())
    .collect();
    let req = ChatRequest {
        messages: messages.into(),
        ..ChatRequest::default()
    };
    let msgs = openai::convert_messages(&model, &req);
    assert_eq!(
        Value::Array(msgs),
        json!([{"role": "user", "content": [{"type": "text", "text": "look"},
            {"type": "text", "text": "(image omitted: model does not support images)"}]}])
    );
}

#[test]
fn summaries_and_bash_become_user_text() {
    let c = Message::from_agent_message(
        &json!({"role": "compactionSummary", "summary": "S", "tokensBefore": 10, "timestamp": 5}),
    )
    .unwrap()
    .unwrap();
    let b = Message::from_agent_message(
        &json!({"role": "branchSummary", "summary": "B", "fromId": "x", "timestamp": 6}),
    )
    .unwrap()
    .unwrap();
    let x = Message::from_agent_message(
        &json!({"role": "bashExecution", "command": "ls", "output": "a",
        "exitCode": 2, "cancelled": false, "truncated": false, "timestamp": 7}),
    )
    .unwrap()
    .unwrap();
    let hidden = Message::from_agent_message(
        &json!({"role": "bashExecution", "command": "ls", "output": "",
        "exitCode": 0, "excludeFromContext": true, "timestamp": 7}),
    )
    .unwrap();
    assert!(hidden.is_none());
    let req = ChatRequest {
        messages: vec![c, b, x].into(),
        ..ChatRequest::default()
    };
    let msgs = openai::convert_messages(&fake_model("http://x"), &req);
    let texts: Vec<&str> = msgs
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "The conversation history before this point was compacted into the following summary:\n\n<summary>\nS\n</summary>",
            "The following is a summary of a branch that this conversation came back from:\n\n<summary>\nB</summary>",
            "Ran `ls`\n```\na\n```\n\nCommand exited with code 2",
        ]
    );
}

/// The bytes the HTTP driver sends (written message by message from the
/// borrowed history) equal the serialised `build_body` value, for both wires,
/// every recorded history, foreign and own models, with and without images,
/// system prompt, tools and thinking.
#[test]
fn streamed_bodies_equal_the_json_value_bodies() {
    let mut models = Vec::new();
    for reasoning in [false, true] {
        for images in [false, true] {
            let mut o = fake_model("http://x");
            o.reasoning = reasoning;
            o.input_images = images;
            models.push(o);
            let mut a = claude();
            a.reasoning = reasoning;
            a.input_images = images;
            models.push(a);
        }
    }
    let tools = crate::tools();
    for name in ["s02-tools", "s07-custom", "s12-image", "s09-errors"] {
        let messages = history(name);
        for model in &models {
            for thinking in [bh_llm::ThinkingLevel::Off, bh_llm::ThinkingLevel::High] {
                for (system, tools) in [(None, &tools[..0]), (Some("Be brief."), &tools[..])] {
                    let req = ChatRequest {
                        system_prompt: system.map(str::to_owned),
                        messages: messages.as_slice().into(),
                        tools: tools.into(),
                        thinking,
                        ..ChatRequest::default()
                    };
                    let (value, bytes) = match model.api {
                        Api::AnthropicMessages => (
                            anthropic::build_body(model, &req),
                            anthropic::body_bytes(model, &req).unwrap(),
                        ),
                        _ => (
                            openai::build_body(model, &req),
                            openai::body_bytes(model, &req).unwrap(),
                        ),
                    };
                    assert_eq!(
                        String::from_utf8(bytes).unwrap(),
                        serde_json::to_string(&value).unwrap(),
                        "{name} {} images={} thinking={thinking:?}",
                        model.id,
                        model.input_images
                    );
                }
            }
        }
    }
}
