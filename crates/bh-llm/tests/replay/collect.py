#!/usr/bin/env python3
"""Copies the recorded provider streams of the replay suite out of a clone of their source
repository and writes manifest.json (source repository, path and commit of each).

Usage: collect.py <clone of vercel/ai> <clone of pydantic/pydantic-ai>   (run from this folder)

The recordings are the `*.chunks.txt` files the Vercel AI SDK keeps as test data: one JSON
value per line, the `data` of each server-sent event as the provider sent it (Anthropic's event
name is the value's `type`). Two streams are derived from a recording, because no public
recording of a response cut by the token limit in the middle of a tool call was found: they are
the recording's events up to a point inside the tool call's arguments, then the provider's own
closing events with the stop reason set to the limit. Each says so in the manifest.

Some recordings are taken at a given older commit (PINNED: the file is no longer in the
repository's newest tree), and some from pydantic-ai's VCR cassettes (CASSETTES: the `data:`
lines of one recorded response body, picked by a string that only that response holds).
"""
import json
import subprocess
import sys

REPO = "vercel/ai"
CASES = [
    # name, wire, path, what it covers
    ("anthropic-text", "anthropic", "packages/anthropic/src/__fixtures__/anthropic-text.chunks.txt", "text; ping events"),
    ("anthropic-json-tool", "anthropic", "packages/anthropic/src/__fixtures__/anthropic-json-tool.2.chunks.txt", "text then tool use with streamed arguments"),
    ("anthropic-tool-no-args", "anthropic", "packages/anthropic/src/__fixtures__/anthropic-tool-no-args.chunks.txt", "tool use without arguments"),
    ("anthropic-thinking", "anthropic", "packages/anthropic/src/__fixtures__/anthropic-clear-thinking.1.chunks.txt", "thinking with signature"),
    ("anthropic-thinking-context-editing", "anthropic", "packages/anthropic/src/__fixtures__/anthropic-combined-context-editing.1.chunks.txt", "thinking with signature, text"),
    ("anthropic-refusal", "anthropic", "packages/anthropic/src/__fixtures__/anthropic-refusal.chunks.txt", "refusal with stop_details.explanation"),
    ("anthropic-delta-input-tokens", "anthropic", "packages/anthropic/src/__fixtures__/anthropic-message-delta-input-tokens.chunks.txt", "usage completed in message_delta"),
    ("anthropic-web-fetch", "anthropic", "packages/anthropic/src/__fixtures__/anthropic-web-fetch-tool.1.chunks.txt", "server tools and citations"),
    ("anthropic-advisor", "anthropic", "packages/anthropic/src/__fixtures__/anthropic-advisor-stop-reasons.chunks.txt", "server tool blocks of unknown types"),
    ("openai-text", "openai", "packages/openai/src/chat/__fixtures__/openai-text.chunks.txt", "OpenAI text; usage-only final chunk"),
    ("azure-model-router", "openai", "packages/openai/src/chat/__fixtures__/azure-model-router.1.chunks.txt", "Azure: empty id in the first chunk, content filter results"),
    ("groq-tool-call", "openai", "packages/groq/src/__fixtures__/groq-tool-call.chunks.txt", "Groq tool call; usage in the finish chunk"),
    ("xai-text", "openai", "packages/xai/src/__fixtures__/xai-text.chunks.txt", "xAI text with reasoning_content"),
    ("xai-tool-call", "openai", "packages/xai/src/__fixtures__/xai-tool-call.chunks.txt", "xAI reasoning then tool call; reasoning tokens"),
    ("deepseek-reasoning", "openai", "packages/deepseek/src/chat/__fixtures__/deepseek-reasoning.chunks.txt", "DeepSeek reasoning model (reasoning_content)"),
    ("deepseek-tool-call", "openai", "packages/deepseek/src/chat/__fixtures__/deepseek-tool-call.chunks.txt", "DeepSeek reasoning then tool call with streamed arguments"),
    ("deepseek-text-length", "openai", "packages/deepseek/src/chat/__fixtures__/deepseek-text.chunks.txt", "finish_reason length"),
    ("moonshot", "openai", "packages/moonshotai/src/__fixtures__/moonshotai-stream.chunks.txt", "Moonshot reasoning; cached tokens"),
    ("alibaba-tool-call", "openai", "packages/alibaba/src/__fixtures__/alibaba-tool-call.chunks.txt", "Qwen tool call; empty id"),
]

# name, wire, path, commit, what it covers: a vercel/ai recording at the commit that added it.
PINNED = [
    ("anthropic-parallel-tools", "anthropic", "packages/anthropic/src/__fixtures__/anthropic-issue-15652-false.chunks.txt", "3be1578c84110aaa4be71b39d8e5cc839e26d398", "parallel tool calls: three tool_use blocks in one response"),
]
CASSETTE_REPO = "pydantic/pydantic-ai"
# name, wire, path, string picking the response, what it covers.
CASSETTES = [
    ("openai-parallel-tools", "openai", "tests/cassettes/test_temporal/test_complex_agent_run.yaml", "chatcmpl-C2QD1kGWsTW5OWiqAtOSFEAOfPfQH", "OpenAI parallel tool calls: tool_calls index 0 and 1 in one stream; usage-only final chunk"),
    ("anthropic-redacted-thinking", "anthropic", "tests/models/cassettes/test_anthropic/test_anthropic_model_thinking_part_redacted_stream.yaml", "redacted_thinking", "redacted thinking: two redacted_thinking blocks, then text"),
]


def cassette_chunks(text, pick):
    """The `data:` values of the one recorded response body holding `pick`."""
    import yaml
    bodies = []
    for it in yaml.safe_load(text)["interactions"]:
        body = it["response"]["body"]
        body = body.get("string") if "string" in body else body.get("content")
        if isinstance(body, str) and pick in body:
            bodies.append(body)
    assert len(bodies) == 1, f"{pick} picks {len(bodies)} responses"
    data = [l[len("data: "):] for l in bodies[0].splitlines() if l.startswith("data: ")]
    return "\n".join(d for d in data if d != "[DONE]") + "\n"


def git(clone, *args):
    return subprocess.run(["git", "-C", clone, *args], check=True, capture_output=True).stdout


def main():
    clone, pyd = sys.argv[1], sys.argv[2]
    head = git(clone, "rev-parse", "HEAD").decode().strip()
    manifest = []
    for name, wire, path, covers in CASES:
        data = git(clone, "show", f"{head}:{path}")
        # The commit that last changed the file, for the record.
        commit = git(clone, "log", "-1", "--format=%H", head, "--", path).decode().strip()
        open(f"streams/{name}.chunks.txt", "wb").write(data)
        manifest.append({"name": name, "wire": wire, "covers": covers,
                         "source": {"repo": REPO, "path": path, "commit": commit}})
    # Derived: Anthropic max_tokens in the middle of a tool call's arguments.
    lines = open("streams/anthropic-json-tool.chunks.txt").read().splitlines()
    out, seen_delta = [], 0
    for l in lines:
        v = json.loads(l)
        if v.get("type") == "content_block_delta" and v["delta"].get("type") == "input_json_delta":
            seen_delta += 1
            if seen_delta == 3:
                break
        out.append(l)
    tool_index = next(json.loads(l)["index"] for l in out if json.loads(l).get("type") == "content_block_start" and json.loads(l)["content_block"]["type"] == "tool_use")
    out.append(json.dumps({"type": "content_block_stop", "index": tool_index}, separators=(",", ":")))
    out.append(json.dumps({"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": None}, "usage": {"output_tokens": 42}}, separators=(",", ":")))
    out.append(json.dumps({"type": "message_stop"}, separators=(",", ":")))
    open("streams/anthropic-max-tokens-mid-tool.chunks.txt", "w").write("\n".join(out) + "\n")
    src = next(m for m in manifest if m["name"] == "anthropic-json-tool")
    manifest.append({"name": "anthropic-max-tokens-mid-tool", "wire": "anthropic",
                     "covers": "max_tokens in the middle of a tool call's arguments",
                     "source": src["source"],
                     "derived": "the recording's events up to its third input_json_delta, then content_block_stop for the tool call, message_delta with stop_reason max_tokens and message_stop, as Anthropic ends a response cut by the limit"})
    # Derived: OpenAI-compatible finish_reason length in the middle of a tool call's arguments.
    lines = open("streams/deepseek-tool-call.chunks.txt").read().splitlines()
    out, args_seen = [], 0
    last = None
    for l in lines:
        v = json.loads(l)
        ch = (v.get("choices") or [{}])[0]
        calls = (ch.get("delta") or {}).get("tool_calls")
        if calls and calls[0].get("function", {}).get("arguments"):
            args_seen += 1
            if args_seen == 4:
                last = v
                break
        out.append(l)
    assert last is not None, "the recording streams its arguments in more than 3 pieces"
    fin = dict(last)
    fin["choices"] = [{"index": 0, "delta": {"content": ""}, "logprobs": None, "finish_reason": "length"}]
    out.append(json.dumps(fin, separators=(",", ":")))
    open("streams/deepseek-length-mid-tool.chunks.txt", "w").write("\n".join(out) + "\n")
    src = next(m for m in manifest if m["name"] == "deepseek-tool-call")
    manifest.append({"name": "deepseek-length-mid-tool", "wire": "openai",
                     "covers": "finish_reason length in the middle of a tool call's arguments",
                     "source": src["source"],
                     "derived": "the recording's chunks before its fourth arguments piece, then that chunk with an empty delta and finish_reason length"})
    for name, wire, path, commit, covers in PINNED:
        open(f"streams/{name}.chunks.txt", "wb").write(git(clone, "show", f"{commit}:{path}"))
        manifest.append({"name": name, "wire": wire, "covers": covers,
                         "source": {"repo": REPO, "path": path, "commit": commit}})
    pyd_head = git(pyd, "rev-parse", "HEAD").decode().strip()
    for name, wire, path, pick, covers in CASSETTES:
        text = git(pyd, "show", f"{pyd_head}:{path}").decode()
        commit = git(pyd, "log", "-1", "--format=%H", pyd_head, "--", path).decode().strip()
        open(f"streams/{name}.chunks.txt", "w").write(cassette_chunks(text, pick))
        manifest.append({"name": name, "wire": wire, "covers": covers,
                         "source": {"repo": CASSETTE_REPO, "path": path, "commit": commit},
                         "extracted": f"the data: lines of the recorded response holding {pick!r}"})
    json.dump({"note": "Recorded provider streams, test data for tests/replay.rs; see collect.py",
               "snapshots": [{"repo": REPO, "commit": head}, {"repo": CASSETTE_REPO, "commit": pyd_head}],
               "cases": manifest},
              open("manifest.json", "w"), indent=1)
    open("manifest.json", "a").write("\n")


main()
