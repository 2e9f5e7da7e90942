// The logic of cohost's Amp plugin (cohost.ts loads it): maps Amp's plugin events to cohost's
// `POST /api/agent-event`. Plain JavaScript (an ES module) so Node's test runner tests it as it
// runs under Amp's Bun; the plugin API object is passed in, never imported.
//
//   session.start                      → idle (and follows the thread's state stream)
//   thread state `awaiting-approval`   → waiting;  back to `running` → running
//   agent.start                        → running   (lastUserPrompt: the prompt)
//   tool.call                          → tool-running   (answers { action: 'allow' }: input unchanged)
//   tool.result                        → running   (answers the result unchanged)
//   agent.end                          → done | error | interrupted (`cancelled`)
//
// Every report carries agent "amp", the thread id, its title when Amp has one, the workspace
// directory (projectDir) and the tmux pane Amp runs in (paneId, from $TMUX_PANE).

export const AGENT = 'amp'
export const DEFAULT_URL = 'http://127.0.0.1:7391'

/** agent.end's status → cohost's. */
export const END_STATUS = { done: 'done', error: 'error', cancelled: 'interrupted' }

/**
 * The daemon's base URL: $COHOST_URL, else the default port.
 * @param {Record<string, string | undefined>} env
 */
export function baseUrl(env) {
	const url = (env.COHOST_URL || DEFAULT_URL).trim()
	return url.replace(/\/+$/, '')
}

/**
 * POSTs one report with fetch. Failures are returned, never thrown: a stopped daemon must not
 * break Amp.
 * @param {string} url
 * @param {object} body
 * @param {{ fetch?: typeof fetch, token?: string }} options
 */
export async function postReport(url, body, options = {}) {
	const doFetch = options.fetch || globalThis.fetch
	const headers = { 'content-type': 'application/json' }
	if (options.token) headers.authorization = `Bearer ${options.token}`
	try {
		const response = await doFetch(`${url}/api/agent-event`, {
			method: 'POST',
			headers,
			body: JSON.stringify(body),
		})
		if (!response.ok) {
			const text = typeof response.text === 'function' ? await response.text() : ''
			return { ok: false, error: `cohost answered ${response.status}: ${text}` }
		}
		return { ok: true }
	} catch (error) {
		return { ok: false, error: `cohost unreachable at ${url}: ${error && error.message}` }
	}
}

/**
 * Wires the handlers on `amp` (the plugin API, or a stand-in with the same `on`, `system`,
 * `helpers` and `logger`).
 * @param {any} amp
 * @param {{ env?: Record<string, string | undefined>, post?: (body: object) => Promise<{ok: boolean, error?: string}>, cwd?: string }} options
 * @returns {{ report: (thread: any, status: string, extra?: object) => Promise<void>, reports: number }}
 */
export function register(amp, options = {}) {
	const env = options.env || (typeof process !== 'undefined' ? process.env : {})
	const url = baseUrl(env)
	const post = options.post || ((body) => postReport(url, body, { token: env.COHOST_TOKEN }))
	const toolEvents = env.COHOST_AMP_TOOL_EVENTS !== '0'
	const projectDir = workspaceDir(amp, options.cwd)
	const followed = new Set()
	const state = { reports: 0 }

	async function title(thread) {
		try {
			const value = thread && thread.title && (await thread.title.get())
			return typeof value === 'string' && value.trim() ? value : undefined
		} catch {
			return undefined
		}
	}

	async function report(thread, status, extra = {}) {
		const threadId = thread && thread.id
		if (!threadId) return
		const body = { agent: AGENT, status, threadId, ...extra }
		if (projectDir) body.projectDir = projectDir
		if (env.TMUX_PANE) body.paneId = env.TMUX_PANE
		const name = await title(thread)
		if (name) body.threadName = name
		state.reports += 1
		const result = await post(body)
		if (!result.ok && amp.logger) amp.logger.log(`cohost: ${result.error}`)
	}

	function follow(thread) {
		if (!thread || !thread.state || followed.has(thread.id)) return
		followed.add(thread.id)
		let previous
		thread.state.subscribe((value) => {
			if (value === 'awaiting-approval') void report(thread, 'waiting')
			else if (value === 'running' && previous === 'awaiting-approval') void report(thread, 'running')
			previous = value
		})
	}

	amp.on('session.start', async (event, ctx) => {
		const thread = threadOf(event, ctx)
		follow(thread)
		await report(thread, 'idle')
	})
	amp.on('agent.start', async (event, ctx) => {
		const thread = threadOf(event, ctx)
		follow(thread)
		const prompt = typeof event.message === 'string' ? event.message.trim() : ''
		await report(thread, 'running', prompt ? { lastUserPrompt: prompt } : {})
	})
	amp.on('agent.end', async (event, ctx) => {
		await report(threadOf(event, ctx), END_STATUS[event.status] || 'error')
	})
	if (toolEvents) {
		amp.on('tool.call', async (event, ctx) => {
			await report(threadOf(event, ctx), 'tool-running')
			return { action: 'allow' }
		})
		amp.on('tool.result', async (event, ctx) => {
			await report(threadOf(event, ctx), 'running')
			const result = { status: event.status }
			if (event.output !== undefined) result.output = event.output
			if (event.error !== undefined) result.error = event.error
			return result
		})
	}
	return Object.assign(state, { report })
}

/** The handler context's thread (it has `title` and `state`), else the event's `{ id }`. */
function threadOf(event, ctx) {
	return (ctx && ctx.thread) || (event && event.thread)
}

/** The workspace root as a path, else the working directory. */
function workspaceDir(amp, cwd) {
	const root = amp.system && amp.system.workspaceRoot
	if (root && amp.helpers && amp.helpers.filePathFromURI) {
		try {
			return amp.helpers.filePathFromURI(root)
		} catch {
			// fall through to the working directory
		}
	}
	if (cwd) return cwd
	return typeof process !== 'undefined' ? process.cwd() : undefined
}
