'use strict'
// The sidecar's request ops: op name -> handler(args) -> result. Only these ops exist; there is no
// way to send a free-text command or code.

const { PROTOCOL_VERSION, badRequest } = require('./protocol')
const { check } = require('./validate')
const { MINECRAFT_VERSION } = require('./server')
const { version: SIDECAR_VERSION } = require('../package.json')

function noArgs (op, args) {
  const extra = Object.keys(args)
  if (extra.length) throw badRequest(`${op} takes no args, got ${extra.join(', ')}`)
}

/**
 * Build the dispatch table over a started World. `onShutdown` runs after the shutdown reply is sent.
 * `testOps` enables ops that exist only so tests can inject faults (`drop_bot`); otherwise they are refused.
 */
function createOps (world, onShutdown, { testOps = false } = {}) {
  return {
    hello (args) {
      noArgs('hello', args)
      return { protocol: PROTOCOL_VERSION, minecraft: MINECRAFT_VERSION, sidecar: SIDECAR_VERSION, agents: world.agents() }
    },
    ping (args) { noArgs('ping', args); return 'pong' },
    reset (args) { return world.reset(args) },
    async execute (args) {
      const call = world.checkCall(args)
      return { events: await world.execute(call) }
    },
    observe (args) { noArgs('observe', args); return world.observe() },
    barrier (args) { noArgs('barrier', args); return world.barrier() },
    shutdown (args) { noArgs('shutdown', args); setImmediate(onShutdown); return true },
    /** Test-only fault: cut one bot's connection; `{dropped}` is false when it was already gone. */
    async drop_bot (args) {
      if (!testOps) throw badRequest('drop_bot is a test-only op; start the sidecar with --test-ops to allow it')
      check.keys(args, ['agent'], 'drop_bot args')
      const agent = check.string(args.agent, 'args.agent')
      return { dropped: await world.dropBot(agent) }
    }
  }
}

module.exports = { createOps, SIDECAR_VERSION }
