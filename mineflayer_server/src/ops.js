'use strict'
// The sidecar's request ops: op name -> handler(args) -> result. Only these ops exist; there is no
// way to send a free-text command or code.
//
// Every op that touches a world names its arena (`args.arena`, opened with `open_arena`). An error
// inside one arena that is not a refusal of the request (a bot disconnected, the reset could not be
// arranged, the truth could not be read) is an `ArenaFault` reply naming that arena; the arena is
// rebuilt at its next reset and the other arenas never notice. A server that fails a bot's join (refuses it,
// speaks another version, never spawns it) is its own reply type (protocol.js SERVER_FAULTS), so the client
// can say to fix the server rather than retry. An episode the sidecar stalled in (stall.js)
// is lost as a whole: every execute, observe or barrier of it after the stall is a `Stalled` reply, whatever
// its skills did, since budgets ran out (or not) for the machine's sake and keeping only the episodes that
// succeeded anyway would bias what they measure.

const { PROTOCOL_VERSION, ProtocolError, SERVER_FAULTS, badRequest, isMap } = require('./protocol')
const { check } = require('./validate')
const { describeStalls } = require('./stall')
const { isOwner } = require('./socket')
const { MINECRAFT_VERSION } = require('./server')
const { version: SIDECAR_VERSION } = require('../package.json')

function noArgs (op, args) {
  const extra = Object.keys(args)
  if (extra.length) throw badRequest(`${op} takes no args, got ${extra.join(', ')}`)
}

/**
 * Build the dispatch table over an ArenaPool. `onShutdown` runs after the shutdown reply is sent.
 * `testOps` enables ops that exist only so tests can inject faults (`drop_bot`); otherwise they are refused.
 * `stalls`: the process's StallMonitor (stall.js), or null to judge no episode by stalls. `token`: the launch
 * token (socket.js ownerToken); `shutdown` and the full arena list of `hello` need it in `args.token`.
 */
function createOps (pool, onShutdown, { testOps = false, stalls = null, token = null } = {}) {
  /** `Stalled` if the sidecar stalled since the arena's episode began (its reset finished). */
  function unstalled (op, entry) {
    if (!stalls || entry.episodeStart === undefined) return
    const crossed = stalls.since(entry.episodeStart)
    if (!crossed.length) return
    throw new ProtocolError('Stalled', `arena ${entry.name}: the sidecar stalled during this episode, before this ${op} ` +
      `finished: ${describeStalls(crossed)}. Skills run on wall-clock budgets, so the episode is lost for the machine's ` +
      'sake, not the agents\': the next reset starts another (give a paused or starved machine more CPU, or fewer arenas)')
  }

  /**
   * Run `fn(entry)` on the arena `args` names, which the requesting connection (`owner`) must hold; errors
   * other than refusals become ArenaFault.
   */
  async function onArena (op, args, owner, fields, fn) {
    check.keys(args, ['arena', ...fields], `${op} args`)
    const entry = pool.owned(args.arena, owner)
    try {
      return await fn(entry)
    } catch (err) {
      if (err instanceof ProtocolError) {
        // a server that failed a bot's (re)join: that type travels as it is, and the arena is rebuilt at its next reset
        if (SERVER_FAULTS.includes(err.type)) entry.broken = err.message
        throw err
      }
      entry.broken = err.message
      throw new ProtocolError('ArenaFault', `arena ${entry.name}: ${err.message}; this episode is lost: the next reset rebuilds the arena`)
    }
  }

  /** An arena that lost its episode serves nothing of it until a reset rebuilds it. */
  function intact (entry) {
    if (entry.broken !== null) throw new Error(`it lost this episode earlier (${entry.broken})`)
  }

  return {
    /** Versions and arenas: every arena for the process that started the sidecar (`token`), else this connection's. */
    hello (args, { owner } = {}) {
      check.keys(args, ['token'], 'hello args')
      const all = token !== null && isOwner(token, args.token)
      return {
        protocol: PROTOCOL_VERSION,
        minecraft: MINECRAFT_VERSION,
        sidecar: SIDECAR_VERSION,
        arenas: all ? pool.list() : pool.list({ heldBy: owner }),
        max_arenas: pool.maxArenas
      }
    },
    ping (args) { noArgs('ping', args); return 'pong' },
    /**
     * Hold an arena for this connection (`arena`: a name, else the first free or a new one); connects
     * `agents`' bots if given. Every other op on it must come on the same connection.
     */
    async open_arena (args, { owner }) {
      check.keys(args, ['arena', 'agents'], 'open_arena args')
      const agents = args.agents === undefined ? [] : args.agents
      if (!Array.isArray(agents) || !agents.every(a => typeof a === 'string' && /^[A-Za-z0-9_]{1,16}$/.test(a))) {
        throw badRequest('open_arena args.agents must be a list of agent names (1-16 of A-Z a-z 0-9 _)')
      }
      let entry
      try {
        entry = await pool.open({ name: args.arena ?? null, agents, owner })
      } catch (err) {
        if (err instanceof ProtocolError) throw err
        throw new ProtocolError('ArenaFault', `open_arena: ${err.message}`)
      }
      const w = entry.world
      return { arena: entry.name, origin: [w.origin.x, 0, w.origin.z], agents: w.agents() }
    },
    close_arena (args, { owner }) {
      check.keys(args, ['arena'], 'close_arena args')
      return pool.close(args.arena, owner)
    },
    reset (args, { owner }) {
      return onArena('reset', args, owner, ['spec', 'rebuild'], async entry => {
        if (!isMap(args.spec)) throw badRequest('reset args.spec must be the episode spec (a map)')
        const rebuild = args.rebuild === true || entry.broken !== null
        if (rebuild) entry.world.log('world', `rebuilding${entry.broken ? ` after: ${entry.broken}` : ' on request'}`)
        const result = await entry.world.reset(args.spec, { rebuild })
        entry.broken = null
        entry.episodeStart = stalls ? stalls.now() : undefined
        return { ...result, rebuilt: rebuild }
      })
    },
    execute (args, { owner }) {
      return onArena('execute', args, owner, ['call'], async entry => {
        const call = entry.world.checkCall(args.call)
        intact(entry)
        const events = await entry.world.execute(call)
        unstalled('execute', entry)
        return { events }
      })
    },
    observe (args, { owner }) {
      return onArena('observe', args, owner, [], async entry => { intact(entry); const truth = await entry.world.observe(); unstalled('observe', entry); return truth })
    },
    barrier (args, { owner }) {
      return onArena('barrier', args, owner, [], async entry => { intact(entry); const done = await entry.world.barrier(); unstalled('barrier', entry); return done })
    },
    /** Stop the sidecar: only for the process that started it (`token`), whose other worlds it would end too. */
    shutdown (args) {
      check.keys(args, ['token'], 'shutdown args')
      if (token === null || !isOwner(token, args.token)) {
        throw badRequest('shutdown is for the process that started this sidecar (it holds the launch token); ' +
          'let go of your arenas with close_arena')
      }
      setImmediate(onShutdown)
      return true
    },
    /** Test-only fault: cut one bot's connection, from any connection (as a network fault would); `{dropped}` is false when it was already gone. */
    async drop_bot (args) {
      if (!testOps) throw badRequest('drop_bot is a test-only op; start the sidecar with --test-ops to allow it')
      check.keys(args, ['arena', 'agent'], 'drop_bot args')
      const entry = pool.get(args.arena)
      const agent = check.string(args.agent, 'args.agent')
      return { dropped: await entry.world.dropBot(agent) }
    }
  }
}

module.exports = { createOps, SIDECAR_VERSION }
