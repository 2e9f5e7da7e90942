#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets into fuzz/seeds/<target>/ (committed).

Run from the repository root: python3 fuzz/make_seeds.py. The seeds are small valid inputs
(a log segment with checksummed and legacy lines, codex JSON-RPC lines, Claude hook lines and
transcript records, request bodies, tmux output) that the fuzzer mutates from.
"""
import json
import os
import shutil
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")


# The targets whose seeds this run wrote, each emptied before its first seed; the others
# (watch_records: the recorded files of tests/fixtures/watchers/, docs/fuzzing.md) are left.
CLEARED = set()


def write(target, name, data):
    path = os.path.join(ROOT, target)
    if target not in CLEARED:
        shutil.rmtree(path, ignore_errors=True)
        CLEARED.add(target)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, name), "wb") as out:
        out.write(data if isinstance(data, bytes) else data.encode())


def event(seq, kind="meta.log", data=None, session="s"):
    data = data if data is not None else {"message": f"m{seq}"}
    return json.dumps(
        {"seq": seq, "ts": 1795960165345 + seq, "session": session, "sessionSeq": seq, "type": kind, "data": data},
        separators=(",", ":"),
    )


def checksummed(json_text):
    crc = zlib.crc32(json_text.encode())
    return json_text[:-1] + ',"crc":"%08x"}\n' % crc


def main():
    lines = [checksummed(event(seq)) for seq in range(1, 6)]
    legacy = [event(seq) + "\n" for seq in range(1, 6)]
    damaged = {"missing": [{"from": 2, "to": 3, "inSnapshot": True}], "missingCount": 2, "quarantined": [],
               "quarantinedCount": 0, "quarantineFile": "q", "snapshotSeq": 3, "logFirstSeq": 1, "logLastSeq": 1}
    write("event_log_scan", "checksummed", "".join(lines))
    write("event_log_scan", "legacy", "".join(legacy))
    write("event_log_scan", "two_segments", "".join(lines[:3]) + "\xff" + "".join(lines[3:]))
    write("event_log_scan", "torn", "".join(lines) + lines[0][:30])
    write("event_log_files", "one_segment", b"\x00" + "".join(lines).encode())
    write("event_log_files", "with_report",
          b"\x00" + (lines[0] + checksummed(event(4, "log.damaged", damaged, None))).encode())
    write("event_log_files", "three_segments",
          b"\x00" + "".join(lines[:2]).encode() + b"\xff\x00" + "".join(lines[2:4]).encode() + b"\xff\x03" + lines[4].encode())

    rpc = [
        {"method": "turn/started", "params": {"threadId": "t", "turn": {"id": "u1", "status": "inProgress"}}},
        {"method": "item/started", "params": {"threadId": "t", "turnId": "u1", "item": {"type": "commandExecution", "id": "c1", "command": "ls", "cwd": "/w", "status": "inProgress"}}},
        {"method": "item/agentMessage/delta", "params": {"threadId": "t", "turnId": "u1", "itemId": "i1", "delta": "Hel"}},
        {"method": "item/completed", "params": {"threadId": "t", "turnId": "u1", "item": {"type": "agentMessage", "id": "i1", "text": "Hello"}}},
        {"id": 7, "method": "item/commandExecution/requestApproval", "params": {"threadId": "t", "turnId": "u1", "itemId": "c1", "command": "rm -rf x", "cwd": "/w"}},
        {"method": "thread/tokenUsage/updated", "params": {"threadId": "t", "turnId": "u1", "tokenUsage": {"total": {"inputTokens": 10, "outputTokens": 2, "totalTokens": 12}, "last": {"inputTokens": 10}, "modelContextWindow": 1000}}},
        {"method": "turn/completed", "params": {"threadId": "t", "turn": {"id": "u1", "status": "completed", "items": []}}},
        {"id": 1, "result": {"thread": {"id": "t"}}},
        {"id": 2, "error": {"code": -32600, "message": "bad"}},
    ]
    write("codex_rpc", "session", "\n".join(json.dumps(m) for m in rpc) + "\n")
    write("codex_rpc", "crlf_and_garbage", "not json\r\n[1,2]\r\n" + json.dumps(rpc[0]))
    methods = ["turn/started", "turn/completed", "item/started", "item/completed"]
    for index, message in enumerate(rpc[:7]):
        pick = methods.index(message["method"]) if message["method"] in methods else index
        write("codex_normalize", f"m{index}", bytes([pick]) + json.dumps(message["params"]).encode())

    hook = lambda event, payload: json.dumps({"receivedAt": 1, "event": event, "payload": payload})
    records = [
        b"\x00" + hook("SessionStart", {"session_id": "s1", "transcript_path": "/t/s1.jsonl", "cwd": "/w", "hook_event_name": "SessionStart", "source": "startup"}).encode(),
        b"\x00" + hook("UserPromptSubmit", {"session_id": "s1", "transcript_path": "/t/s1.jsonl", "prompt_id": "p1", "hook_event_name": "UserPromptSubmit", "prompt": "Say hello"}).encode(),
        b"\x02" + json.dumps({"type": "user", "promptId": "p1", "message": {"role": "user", "content": "Say hello"}, "uuid": "u1"}).encode(),
        b"\x00" + hook("PreToolUse", {"session_id": "s1", "prompt_id": "p1", "tool_name": "Bash", "tool_input": {"command": "echo hi"}, "tool_use_id": "toolu_1"}).encode(),
        b"\x02" + json.dumps({"type": "assistant", "uuid": "a1", "message": {"content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "echo hi"}}]}}).encode(),
        b"\x02" + json.dumps({"type": "assistant", "uuid": "a2", "message": {"id": "msg_1", "content": [{"type": "text", "text": "Hello"}], "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 2}}}).encode(),
        b"\x00" + hook("Stop", {"session_id": "s1", "prompt_id": "p1", "hook_event_name": "Stop", "last_assistant_message": "Hello"}).encode(),
        b"\x02" + json.dumps({"type": "system", "subtype": "turn_duration", "durationMs": 5859}).encode(),
        b"\x04\x00busy",
        b"\x04\x01idle",
        b"\x05next prompt",
    ]
    write("claude_records", "turn", b"\n".join(records))

    bodies = [
        (0, {"agent": "codex", "status": "running", "tmuxSession": "s1", "threadId": "t", "lastUserPrompt": "hi", "liveness": "alive", "ts": 1}),
        (1, {"session": "s1", "text": "Deploying", "tone": "warn"}),
        (2, {"session": "s1", "current": 3, "total": 10, "label": "x"}),
        (3, {"session": "s1", "message": "m", "tone": "info", "source": "ci"}),
        (4, {"session": "s1"}),
        (5, {"session": "s1", "source": "tmux"}),
        (6, {"runtime": "codex", "cwd": "/w", "prompt": "hi", "idempotencyKey": "k"}),
        (7, {"text": "hi", "idempotencyKey": "k"}),
        (8, {"decision": "accept"}),
        (9, {"objective": "x", "status": "active"}),
        (13, {"prompt": "hi", "idempotencyKey": "k"}),
        (14, {"action": "takeover", "by": "me"}),
        (15, {"revision": 1, "prompt": "p"}),
    ]
    for route, body in bodies:
        write("http_bodies", f"route{route}", bytes([route]) + json.dumps(body).encode())

    write("tmux_output", "list_sessions", "42\t$0\t1\t2\t/home/me/proj\twork\n42\t$1\t0\t1\t/tmp\tname\twith tab\n")
    write("tmux_output", "pane_ref", "%3 4242\n")
    # The captures of Claude's TUI, one directory per release (tests/fixtures/claude/screens/<release>/).
    screens = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "claude", "screens")
    for folder, _, names in sorted(os.walk(screens)):
        release = os.path.relpath(folder, screens).replace(os.sep, "_")
        for name in sorted(names):
            if name.endswith(".txt"):
                prefix = "screen_" if release == "." else f"screen_{release}_"
                with open(os.path.join(folder, name), "rb") as source:
                    write("tmux_output", prefix + name[:-4], source.read())


if __name__ == "__main__":
    main()
