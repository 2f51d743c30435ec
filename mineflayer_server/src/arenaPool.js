'use strict'
// The arenas of one sidecar: disjoint regions of one Minecraft world, each a World with its own bots
// (`<arena>_<agent>`), layout, skill queues, handoff ledger and ground truth. Arena k lies at
// x = x0 + k * ARENA_SPACING; a World keeps everything it places within ARENA_REACH of its origin, so
// no item, block or bot of one arena comes near another.
//
// A client opens an arena (`open_arena`) before using it and closes it when done; an open arena belongs
// to the connection that opened it (its ZeroMQ routing id, `owner`): only that connection may reset, drive,
// observe or close it, and it is refused to every other. An arena whose episode failed (ArenaFault) is rebuilt at its
// next reset: its bots rejoin and its region is cleared, while the other arenas go on. The arenas of a connection
// that went away without closing them (its process died) are released (socket.js watchDepartures).

const { World } = require('./world')
const { ProtocolError, badRequest } = require('./protocol')
const { MAX_AGENTS } = require('./spec')

/** Blocks between the origins of neighbouring arenas (along x). */
const ARENA_SPACING = 64
/** Arena names: short, so that `<arena>_<agent>` stays a valid 16-character username. */
const ARENA_NAME = /^[a-z][a-z0-9]{0,5}$/

class ArenaPool {
  /**
   * @param o.makeArena () -> a fresh EmbeddedArena or ExternalArena (the server access of one arena)
   * @param o.rules, o.log, o.skillTimeoutMs, o.spawnTimeoutMs as for World
   * @param o.maxArenas how many arenas may exist at once
   * @param o.x0 block x of arena 0's origin
   */
  constructor ({ makeArena, rules, log, skillTimeoutMs, spawnTimeoutMs, maxArenas = 16, x0 = 0 }) {
    Object.assign(this, { makeArena, rules, log, skillTimeoutMs, spawnTimeoutMs, maxArenas, x0 })
    this.entries = new Map() // name -> {name, slot, world, owner (routing id of the holder, or null), broken}
  }

  /** Every arena (or those the connection `heldBy` holds), in slot order: `{name, slot, origin, held, agents}`. */
  list ({ heldBy } = {}) {
    const entries = [...this.entries.values()].filter(e => heldBy === undefined || (e.owner !== null && e.owner === heldBy))
    return entries.sort((a, b) => a.slot - b.slot).map(e => ({
      name: e.name, slot: e.slot, origin: [e.world.origin.x, 0, e.world.origin.z], held: e.owner !== null, agents: e.world.agents()
    }))
  }

  /** The arena named `name`, or BadRequest naming the open ones. */
  get (name) {
    if (typeof name !== 'string' || !name) throw badRequest(`args.arena must name an arena; open one with open_arena (arenas: ${this.names()})`)
    const entry = this.entries.get(name)
    if (!entry) throw badRequest(`no arena named ${JSON.stringify(name)}; open it with open_arena (arenas: ${this.names()})`)
    return entry
  }

  names () { return [...this.entries.keys()].join(', ') || 'none' }

  /** The arena named `name` if the connection `owner` holds it; else ArenaBusy (another holds it) or BadRequest (nobody). */
  owned (name, owner) {
    const entry = this.get(name)
    if (entry.owner === owner) return entry
    if (entry.owner === null) throw badRequest(`arena ${entry.name} is not open on this connection; open it with open_arena first`)
    throw new ProtocolError('ArenaBusy', `arena ${entry.name} is held by another connection; only the connection that opened it may use or close it`)
  }

  /**
   * Hold an arena for the connection `owner`: `name` if given (created when new; ArenaBusy when another
   * connection holds it), else the first free existing arena or a new one. Connects `agents`' bots if given.
   * Resolves to the entry.
   */
  async open ({ name = null, agents = [], owner }) {
    if (typeof owner !== 'string' || !owner) throw new Error('ArenaPool.open needs the routing id of the connection that holds the arena')
    // each agent is a bot joining the server: checked before any is connected
    if (agents.length > MAX_AGENTS) throw badRequest(`open_arena names ${agents.length} agents; an arena holds at most ${MAX_AGENTS} bots`)
    let entry = null
    if (name !== null) {
      if (typeof name !== 'string' || !ARENA_NAME.test(name)) {
        throw badRequest(`arena name ${JSON.stringify(name)} must be 1-6 of a-z 0-9, starting with a letter`)
      }
      entry = this.entries.get(name) || null
      if (entry && entry.owner !== null && entry.owner !== owner) {
        throw new ProtocolError('ArenaBusy', `arena ${name} is held by another client; open another arena (open_arena without a name) or close ${name} first`)
      }
    } else {
      entry = [...this.entries.values()].sort((a, b) => a.slot - b.slot).find(e => e.owner === null) || null
    }
    if (!entry) entry = this.create(name)
    entry.owner = owner
    try {
      if (agents.length) await entry.world.ensureBots(agents)
    } catch (err) {
      entry.owner = null
      entry.broken = err.message
      throw err
    }
    return entry
  }

  /** A new arena at the lowest free slot; its name defaults to `a<slot>`. */
  create (name) {
    if (this.entries.size >= this.maxArenas) {
      throw new ProtocolError('ArenaBusy', `all ${this.maxArenas} arenas are held; close one, or start the sidecar with a larger --max-arenas`)
    }
    const used = new Set([...this.entries.values()].map(e => e.slot))
    let slot = 0
    while (used.has(slot)) slot++
    if (name === null) {
      name = `a${slot}`
      for (let k = 0; this.entries.has(name); k++) name = `a${slot}x${k}`
    }
    const world = new World({
      arena: this.makeArena(), rules: this.rules, log: this.log, skillTimeoutMs: this.skillTimeoutMs, spawnTimeoutMs: this.spawnTimeoutMs,
      name, origin: [this.x0 + slot * ARENA_SPACING, 0]
    })
    const entry = { name, slot, world, owner: null, broken: null }
    this.entries.set(name, entry)
    this.log('arenas', `arena ${name} at x=${world.origin.x}`)
    return entry
  }

  /** Let go of an arena the connection `owner` holds (one nobody holds: nothing to do); its bots stay connected for whoever opens it next. */
  close (name, owner) {
    const entry = this.get(name)
    if (entry.owner !== null) this.owned(name, owner).owner = null
    return true
  }

  /** The routing ids of the connections holding arenas. */
  holders () {
    return new Set([...this.entries.values()].map(e => e.owner).filter(o => o !== null))
  }

  /**
   * Let go of every arena the connection `owner` holds, that connection being gone (its process died without
   * closing them). Calls of theirs may still run, so each is rebuilt at its next reset. Returns their names.
   */
  release (owner) {
    const names = []
    for (const entry of this.entries.values()) {
      if (entry.owner !== owner) continue
      entry.owner = null
      entry.broken = entry.broken || 'the connection that held it went away'
      names.push(entry.name)
    }
    if (names.length) this.log('arenas', `released ${names.join(', ')}: the connection that held them is gone`)
    return names
  }

  async closeAll () {
    await Promise.all([...this.entries.values()].map(e => e.world.close()))
  }
}

module.exports = { ArenaPool, ARENA_SPACING, ARENA_NAME }
