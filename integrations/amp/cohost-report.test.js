// Tests of the Amp plugin's logic against a stand-in for Amp's plugin API (the events and
// context shapes `amp plugins show-docs` documents). Run: node --test integrations/amp/
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { register, postReport, baseUrl } from './cohost-report.js'

/** A stand-in for the plugin API: records handlers, fires events like Amp does. */
function standIn({ workspaceRoot = 'file:///home/me/proj' } = {}) {
	const handlers = new Map()
	const logs = []
	return {
		handlers,
		logs,
		logger: { log: (line) => logs.push(line) },
		system: { workspaceRoot },
		helpers: { filePathFromURI: (uri) => decodeURIComponent(String(uri).replace(/^file:\/\//, '')) },
		on(event, handler) {
			assert.ok(!handlers.has(event), `one handler per event (${event})`)
			handlers.set(event, handler)
			return { unsubscribe() {} }
		},
		fire(event, payload, ctx) {
			const handler = handlers.get(event)
			assert.ok(handler, `a handler for ${event}`)
			return handler(payload, ctx)
		},
	}
}

/** A thread context like Amp's: id, a title observable and a state observable. */
function thread(id, titleValue = null) {
	const observers = []
	return {
		id,
		title: { get: async () => titleValue },
		state: {
			subscribe(fn) {
				observers.push(fn)
				return { unsubscribe() {} }
			},
			get: async () => 'idle',
		},
		emit(value) {
			for (const fn of observers) fn(value)
		},
	}
}

function recorder() {
	const bodies = []
	const post = async (body) => {
		bodies.push(body)
		return { ok: true }
	}
	return { bodies, post }
}

const flush = () => new Promise((resolve) => setImmediate(resolve))

test('a turn with a tool call reports running, tool-running, running, done', async () => {
	const amp = standIn()
	const { bodies, post } = recorder()
	register(amp, { env: { TMUX_PANE: '%7' }, post })
	const ctx = { thread: thread('T-1', 'Fix the flaky test') }
	await amp.fire('session.start', { thread: { id: 'T-1' } }, ctx)
	await amp.fire('agent.start', { thread: { id: 'T-1' }, message: ' Run the tests ', id: 1 }, ctx)
	const verdict = await amp.fire('tool.call', { thread: { id: 'T-1' }, toolUseID: 'toolu_1', tool: 'Bash', input: { cmd: 'ls' } }, ctx)
	assert.deepEqual(verdict, { action: 'allow' }, 'the tool runs with its input unchanged')
	const result = await amp.fire('tool.result', { thread: { id: 'T-1' }, toolUseID: 'toolu_1', tool: 'Bash', input: {}, status: 'done', output: 'ok' }, ctx)
	assert.deepEqual(result, { status: 'done', output: 'ok' }, 'the result goes back unchanged')
	await amp.fire('agent.end', { thread: { id: 'T-1' }, message: 'Run the tests', id: 1, status: 'done', messages: [] }, ctx)
	assert.deepEqual(bodies.map((b) => b.status), ['idle', 'running', 'tool-running', 'running', 'done'])
	for (const body of bodies) {
		assert.equal(body.agent, 'amp')
		assert.equal(body.threadId, 'T-1')
		assert.equal(body.threadName, 'Fix the flaky test')
		assert.equal(body.projectDir, '/home/me/proj')
		assert.equal(body.paneId, '%7')
	}
	assert.equal(bodies[1].lastUserPrompt, 'Run the tests')
})

test('agent.end maps cancelled to interrupted and error to error', async () => {
	const amp = standIn()
	const { bodies, post } = recorder()
	register(amp, { env: {}, post })
	const ctx = { thread: thread('T-2') }
	for (const status of ['cancelled', 'error', 'something-new']) {
		await amp.fire('agent.end', { thread: { id: 'T-2' }, status, messages: [] }, ctx)
	}
	assert.deepEqual(bodies.map((b) => b.status), ['interrupted', 'error', 'error'])
	assert.equal(bodies[0].threadName, undefined, 'no title yet: none is sent')
	assert.equal(bodies[0].paneId, undefined, 'outside tmux: no pane')
})

test('an approval prompt is waiting until the thread runs again', async () => {
	const amp = standIn()
	const { bodies, post } = recorder()
	register(amp, { env: {}, post })
	const ctx = { thread: thread('T-3') }
	await amp.fire('agent.start', { thread: { id: 'T-3' }, message: 'rm it', id: 1 }, ctx)
	ctx.thread.emit('running')
	ctx.thread.emit('awaiting-approval')
	ctx.thread.emit('running')
	ctx.thread.emit('idle')
	await flush()
	assert.deepEqual(bodies.map((b) => b.status), ['running', 'waiting', 'running'])
	// The state stream is followed once per thread, however many turns start.
	await amp.fire('agent.start', { thread: { id: 'T-3' }, message: 'again', id: 2 }, ctx)
	ctx.thread.emit('awaiting-approval')
	await flush()
	assert.deepEqual(bodies.map((b) => b.status), ['running', 'waiting', 'running', 'running', 'waiting'])
})

test('tool events can be turned off', () => {
	const amp = standIn()
	register(amp, { env: { COHOST_AMP_TOOL_EVENTS: '0' }, post: recorder().post })
	assert.deepEqual([...amp.handlers.keys()].sort(), ['agent.end', 'agent.start', 'session.start'])
})

test('without a workspace the working directory is the project', async () => {
	const amp = standIn({ workspaceRoot: null })
	const { bodies, post } = recorder()
	register(amp, { env: {}, post, cwd: '/tmp/elsewhere' })
	await amp.fire('session.start', { thread: { id: 'T-4' } }, { thread: thread('T-4') })
	assert.equal(bodies[0].projectDir, '/tmp/elsewhere')
})

test('a failed post is logged, never thrown', async () => {
	const amp = standIn()
	register(amp, { env: {}, post: async () => ({ ok: false, error: 'cohost unreachable' }) })
	await amp.fire('session.start', { thread: { id: 'T-5' } }, { thread: thread('T-5') })
	assert.deepEqual(amp.logs, ['cohost: cohost unreachable'])
})

test('postReport sends JSON to /api/agent-event and reports errors as values', async () => {
	const calls = []
	const ok = await postReport('http://127.0.0.1:9', { agent: 'amp' }, {
		token: 'tok',
		fetch: async (url, init) => {
			calls.push({ url, init })
			return { ok: true, status: 200 }
		},
	})
	assert.deepEqual(ok, { ok: true })
	assert.equal(calls[0].url, 'http://127.0.0.1:9/api/agent-event')
	assert.equal(calls[0].init.method, 'POST')
	assert.equal(calls[0].init.headers['content-type'], 'application/json')
	assert.equal(calls[0].init.headers.authorization, 'Bearer tok')
	assert.deepEqual(JSON.parse(calls[0].init.body), { agent: 'amp' })
	const refused = await postReport('http://x', {}, { fetch: async () => ({ ok: false, status: 404, text: async () => 'session_not_found' }) })
	assert.deepEqual(refused, { ok: false, error: 'cohost answered 404: session_not_found' })
	const down = await postReport('http://x', {}, { fetch: async () => { throw new Error('ECONNREFUSED') } })
	assert.equal(down.ok, false)
	assert.match(down.error, /ECONNREFUSED/)
	assert.equal(baseUrl({ COHOST_URL: 'http://127.0.0.1:8000/' }), 'http://127.0.0.1:8000')
	assert.equal(baseUrl({}), 'http://127.0.0.1:7391')
})

test('cohost.ts registers the same logic', async () => {
	const { readFile } = await import('node:fs/promises')
	const source = await readFile(new URL('./cohost.ts', import.meta.url), 'utf8')
	assert.match(source, /import \{ register \} from '\.\/cohost-report\.js'/)
	assert.match(source, /export default function \(amp: PluginAPI\) \{\s*register\(amp\)/)
	assert.match(source, /export const description = '[^']{1,300}'/)
})
