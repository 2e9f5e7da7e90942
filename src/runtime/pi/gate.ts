/*
 * cohost's approval gate for Pi, written by cohost into each gated session's directory and
 * loaded with `pi --mode rpc -e gate.ts`. It has no imports, so it loads in Pi 0.73.1 and 1.6.0.
 *
 * Before any tool call but the read-only built-ins, it asks cohost through the RPC
 * extension-UI exchange: a `confirm` dialog titled "cohost approval" whose message is the call
 * as JSON. cohost answers `confirmed: true` (the tool runs), `confirmed: false` or
 * `cancelled: true` (the tool is blocked, and the model gets the reason below as its result).
 */
const READ_ONLY = ["read", "grep", "find", "ls"];

export default function (pi: any) {
  pi.on("tool_call", async (event: any, ctx: any) => {
    if (READ_ONLY.includes(event.toolName)) return undefined;
    const ask = JSON.stringify({
      toolName: event.toolName,
      toolCallId: event.toolCallId,
      input: event.input,
    });
    const allowed = await ctx.ui.confirm("cohost approval", ask);
    if (allowed === true) return undefined;
    return {
      block: true,
      reason: "The user declined this tool call through cohost. Do not retry it; continue without it.",
    };
  });
}
