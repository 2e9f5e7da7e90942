// cohost's Amp plugin: reports each thread's status to a local cohost daemon
// (`POST /api/agent-event`). Install: copy this file and cohost-report.js into
// ~/.config/amp/plugins/ (or a project's .amp/plugins/); see README.md.
import type { PluginAPI } from '@ampcode/plugin'
import { register } from './cohost-report.js'

export const description = 'Reports thread status (running, tool-running, waiting, done) to a local cohost daemon'

export default function (amp: PluginAPI) {
	register(amp)
}
