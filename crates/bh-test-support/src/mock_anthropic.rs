//! Answers of an Anthropic Messages API server (`POST /v1/messages`,
//! streamed) for tests, served on 127.0.0.1 by
//! [`crate::mock_openai::serve_by`] (it answers every request, whatever its
//! path): a turn is one SSE body in the event order the API documents
//! (`message_start`, content blocks, `message_delta`, `message_stop`).

use serde_json::{Value, json};

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn turn(model: &str, block: &Value, delta: &Value, stop: &str) -> String {
    [
        event(
            "message_start",
            &json!({"type": "message_start", "message": {"id": "msg_mock", "type": "message",
                "role": "assistant", "model": model, "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        ),
        event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": block}),
        ),
        event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": 0}),
        ),
        event(
            "message_delta",
            &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": 5}}),
        ),
        event("message_stop", &json!({"type": "message_stop"})),
    ]
    .concat()
}

/// A turn that calls tool `name` with `input` (tool-use id `id`).
pub fn tool_use(model: &str, id: &str, name: &str, input: &Value) -> String {
    turn(
        model,
        &json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
        &json!({"type": "input_json_delta", "partial_json": input.to_string()}),
        "tool_use",
    )
}

/// A turn that answers with `text` and ends.
pub fn text(model: &str, text: &str) -> String {
    turn(
        model,
        &json!({"type": "text", "text": ""}),
        &json!({"type": "text_delta", "text": text}),
        "end_turn",
    )
}

/// The number of tool calls in a request's history (which scripted turn it
/// asks for).
pub fn turns_so_far(request: &Value) -> usize {
    // Claude Code merges consecutive assistant turns into one message when
    // it sends the history: count the tool calls answered, not messages.
    request["messages"].as_array().map_or(0, |messages| {
        messages
            .iter()
            .filter(|m| m["role"] == "assistant")
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|block| block["type"] == "tool_use")
            .count()
    })
}
