'use strict'
// One arena's episode logic, the same for every server: one bot per agent, the episode's layout,
// reset, skill execution (serialized per bot, concurrent across bots), the ordering barrier and
// ground-truth observation. What depends on the server (how the world is edited at reset and where
// ground truth comes from) is the arena's job: `arenas/embedded.js` (our flying-squid with its plugin)
// or `arenas/external.js` (any Minecraft 1.21.4 server, through operator commands and the bots' views).
//
// A server may hold several arenas (arenaPool.js): each World owns a region of the world around its
// `origin` and names its bots `<arena>_<agent>`, while every request and reply speaks of the agents by
// their own names. Positions in specs and replies are relative to the arena's origin and floor.

const { Vec3 } = require('vec3')
const { connectBot, isDisconnected, whyEnded, SPAWN_TIMEOUT_MS } = require('./bots')
const { parseSpec } = require('./spec')
const { SKILLS, SkillFailure, checkSkillArgs, checkSkillTable, countOf } = require('./skills')
const { meterOf, noActions } = require('./actions')
const { badRequest, isMap, wireLimits } = require('./protocol')
const { check } = require('./validate')
const { SerialQueue, waitFor, withTimeout, TimeoutError, REPLY_MS } = require('./util')
const { EmbeddedArena, BLOCK_STATIONS } = require('./arenas/embedded')

/**
 * How far (in blocks, along x and z) a spec may place anything from the arena's origin. Arenas lie
 * ARENA_SPACING (arenaPool.js) apart, so at least 16 blocks separate two arenas' contents: further than
 * any toss carries, any bot reaches or any pickup takes.
 */
const ARENA_REACH = 24
/** The region an arena clears at a rebuild: its reach plus the margin where tossed items may land. */
const ARENA_HALF_WIDTH = 32

/**
 * The arena cannot go on with this episode (a bot's connection dropped, the reset could not be
 * arranged, ground truth could not be read): the sidecar replies `ArenaFault` and the arena is rebuilt
 * at its next reset. Other arenas are not affected.
 */
class ArenaFault extends Error {
  constructor (message) {
    super(message)
    this.name = 'ArenaFault'
  }
}

class World {
  /**
   * @param {object} o
   * @param o.arena an EmbeddedArena or ExternalArena; for the embedded server `{serv, api, port, floorY}`
   *   may be passed instead and the arena is built from them
   * @param o.rules the rule tables (rules.js `loadRules`): calls are checked against `rules.ops`
   * @param o.log logger, o.skillTimeoutMs budget per skill step (walking, waiting for a handoff)
   * @param o.spawnTimeoutMs how long a bot may take to join and stand on loaded ground (bots.js SPAWN_TIMEOUT_MS)
   * @param o.name the arena's name (bots join as `<name>_<agent>`); null: bots join under the agents' names
   * @param o.origin block x and z of the arena's (0, 0) (default 0, 0)
   */
  constructor ({ arena, serv, api, port, floorY, rules, log, skillTimeoutMs = 20000, spawnTimeoutMs = SPAWN_TIMEOUT_MS, name = null, origin = [0, 0] }) {
    if (!rules || !rules.ops || !rules.recipes) throw new Error('World needs the rule tables: pass rules = loadRules(dir) (src/rules.js)')
    checkSkillTable(rules.ops)
    this.arena = arena || new EmbeddedArena({ serv, api, port, floorY })
    this.name = name
    this.origin = { x: origin[0], z: origin[1] }
    this.log = name ? (scope, message) => log(scope, `${name}: ${message}`) : log
    Object.assign(this, { rules, skillTimeoutMs, spawnTimeoutMs })
    this.arena.bind(this)
    this.registry = this.arena.registry
    this.bots = new Map() // agent name -> bot (whose username is `username(agent)`)
    this.queues = new Map()
    this.layout = null // {stations: Map name -> {name, kind, pos: Vec3, cells: [Vec3]}}
    this.failedGives = [] // gives that failed this episode, each claimed by at most one await_handoff
    this.tosses = [] // tosses whose items are not all received yet: {from, to, item, left, before}, oldest first
    this.epoch = 0 // counts resets: a skill left over from an earlier episode must not touch this one's notes
    this.busy = new Map() // agent -> skills queued or running (holdPhysics)
  }

  /** The Minecraft username of an agent's bot. */
  username (agent) { return this.name ? `${this.name}_${agent}` : agent }

  /** True for absolute positions inside this arena's region (what a rebuild clears). */
  inRegion (pos) {
    return Math.abs(pos.x - this.origin.x) < ARENA_HALF_WIDTH && Math.abs(pos.z - this.origin.z) < ARENA_HALF_WIDTH
  }

  get floorY () { return this.arena.floorY }
  get api () { return this.arena.api }

  // ---------- bots ----------

  /** Connect (or rejoin) bots so that exactly `names` are online. */
  async ensureBots (names) {
    for (const [name, bot] of this.bots) {
      if (!names.includes(name)) {
        this.log('world', `${name} leaves (not an agent of this episode)`)
        bot.quit()
        this.bots.delete(name)
      }
    }
    const missing = names.filter(n => isDisconnected(this.bots.get(n)))
    // every join is waited for, failed or not: one still under way after this call returned would join later, a
    // bot nobody tracks, under the name the next call's join takes
    const joins = await Promise.allSettled(missing.map(async name => {
      const old = this.bots.get(name)
      if (old) { this.log('world', `rejoining ${name} (its connection dropped)`); old.end() }
      const bot = await connectBot(this.username(name), this.arena.port, this.log, { host: this.arena.host, timeoutMs: this.spawnTimeoutMs })
      this.bots.set(name, bot)
      await this.arena.attach(bot, name)
      if (!this.queues.has(name)) this.queues.set(name, new SerialQueue())
    }))
    const failed = joins.find(j => j.status === 'rejected')
    if (failed) throw failed.reason
    // the bots join concurrently; keep them in the episode's order, not the order their logins finished
    this.bots = new Map(names.map(n => [n, this.bots.get(n)]))
    return missing
  }

  /** Test-only: cut one bot's connection as a network fault would (the next reset rejoins it). */
  async dropBot (name) {
    const bot = this.bots.get(name)
    if (!bot) throw badRequest(`drop_bot: ${JSON.stringify(name)} is not an agent; agents are ${this.agents().join(', ')}`)
    if (isDisconnected(bot)) return false
    this.log('world', `dropping ${name}'s connection (test op)`)
    bot._client.end('dropped by the drop_bot test op')
    await waitFor(() => bot.gcEnded, REPLY_MS, `${name} disconnected`)
    return true
  }

  /** The agents whose bots are online, in the order the last `ensureBots` named them. */
  agents () { return [...this.bots.keys()] }
  bot (name) { return this.bots.get(name) || null }

  /** Run `fn` after every bot's queued skills, keeping new skills waiting until it is done. */
  exclusive (fn) {
    const queues = [...this.queues.values()]
    const gate = Promise.all(queues.map(q => q.tail)).then(fn)
    for (const q of queues) q.tail = gate.then(() => {}, () => {})
    return gate
  }

  // ---------- coordinates ----------

  absolute ([x, y, z]) { return new Vec3(x + this.origin.x, y + this.floorY, z + this.origin.z) }
  relative (v) { return [v.x - this.origin.x, v.y - this.floorY, v.z - this.origin.z] }
  station (name) { return (this.layout && this.layout.stations.get(name)) || null }
  stations () { return this.layout ? [...this.layout.stations.values()] : [] }
  cookTicks () { return this.arena.cookTicks() }

  // ---------- truth, as the arena knows it ----------

  /** How many `item` the agent holds (server state when embedded, the bot's own window otherwise). */
  serverCount (agent, item) { return this.arena.count(agent, item) }
  serverBlockNames (positions) { return this.arena.blockNames(positions) }
  recordToss (from, to, item, count) { this.arena.recordToss(from, to, item, count) }
  takeHandoff (from, to, item, count) { return this.arena.takeHandoff(from, to, item, count) }

  /** Every agent's inventory as the arena knows it (server state when embedded): `{agent: {item: n}}`. */
  inventories () { return Object.fromEntries(this.agents().map(a => [a, this.arena.inventory(a)])) }

  /** A give about to toss; `before` is both agents' inventories just before. Returns the entry. */
  noteToss (from, to, item, count, before) {
    if (this.arena.reserveToss) this.arena.reserveToss(from, to) // with bystanders, only `to` may pick it up
    const toss = { from, to, item, left: count, before }
    this.tosses.push(toss)
    return toss
  }

  /** The toss did not happen after all. */
  forgetToss (toss) { this.tosses = this.tosses.filter(t => t !== toss) }

  /** The toss's items are out of the giver's hands (they may still be in flight): they lie from now. */
  tossThrown (toss) { toss.lyingSince = Date.now() }
  /** The receiver has walked to the toss's items: `lyingToss` counts their lying time from now again. */
  tossCollected (toss) { toss.lyingSince = Date.now() }

  /** A toss from `from` to `to` of `item` whose items have lain at least `ms` without all arriving, or null. */
  lyingToss (from, to, item, ms) {
    const now = Date.now()
    return this.tosses.find(t => t.from === from && t.to === to && t.item === item && t.left > 0 &&
      t.lyingSince !== undefined && now - t.lyingSince >= ms) || null
  }

  /**
   * Mark `count` received items of the tosses from `from` to `to`, oldest first; returns the inventories
   * from just before the earliest of those tosses (null if no toss was noted, which a handoff cannot have).
   */
  claimToss (from, to, item, count) {
    const mine = this.tosses.filter(t => t.from === from && t.to === to && t.item === item)
    const before = mine.length ? mine[0].before : null
    for (const t of mine) {
      const n = Math.min(count, t.left)
      t.left -= n
      count -= n
    }
    this.tosses = this.tosses.filter(t => t.left > 0)
    return before
  }

  /** A failed give from `from` to `to` of `item` not yet reported to an await_handoff; claims it. */
  takeFailedGive (from, to, item) {
    const i = this.failedGives.findIndex(g => g.from === from && g.to === to && g.item === item)
    return i < 0 ? null : this.failedGives.splice(i, 1)[0]
  }

  barrierFor (bot) { return this.arena.barrierFor(bot) }

  /**
   * Every bot's barrier. A bot whose connection ended (a kick, a dropped connection) fails it: its view of the
   * world is gone, so no ground truth may be read without it.
   */
  async barrier () {
    await this.whileConnected(() => Promise.all([...this.bots.values()].map(b => this.barrierFor(b))))
    return true
  }

  /**
   * `fn()`, unless a bot of the arena is disconnected or its connection ends first (a kick that races a reset or
   * a read-back): then an ArenaFault naming the bot and why, at once rather than when `fn` times out.
   */
  async whileConnected (fn) {
    const lost = async (agent, bot) => new ArenaFault(`${agent}'s bot is disconnected (${await whyEnded(bot)})`)
    for (const [agent, bot] of this.bots) if (isDisconnected(bot)) throw await lost(agent, bot)
    const listeners = []
    const ended = new Promise((resolve, reject) => {
      for (const [agent, bot] of this.bots) {
        const onEnd = () => lost(agent, bot).then(reject)
        bot.once('end', onEnd)
        listeners.push([bot, onEnd])
      }
    })
    try {
      return await Promise.race([fn(), ended])
    } finally {
      for (const [bot, onEnd] of listeners) bot.removeListener('end', onEnd)
    }
  }

  // ---------- reset ----------

  /**
   * Arrange the arena for one episode. `rebuild`: first quit every bot of this arena (skills still
   * running on them end at once) and let them join afresh, as after an ArenaFault.
   */
  async reset (rawSpec, { rebuild = false } = {}) {
    const spec = parseSpec(this.registry, rawSpec, this.rules.limits)
    this.checkFits(spec)
    if (rebuild) await this.dropAll()
    return this.exclusive(async () => {
      const start = Date.now()
      this.epoch++
      const rejoined = await this.ensureBots(spec.agents)
      for (const bot of this.bots.values()) {
        bot.pathfinder.setGoal(null)
        bot.clearControlStates()
        if (bot.currentWindow) bot.closeWindow(bot.currentWindow)
      }
      const stations = new Map(spec.stations.map(s => [s.name, {
        name: s.name, kind: s.kind, pos: this.absolute(s.pos), cells: s.cells.map(c => this.absolute(c))
      }]))
      const previous = this.layout
      this.layout = { stations }
      this.failedGives = []
      this.tosses = []
      await this.withPhysics(() => this.whileConnected(async () => {
        await this.arena.arrange(this, spec, stations, previous)
        await this.settle(spec, stations)
      }))
      return { ms: Date.now() - start, rejoined }
    })
  }

  /**
   * BadRequest unless the spec's bot names are valid usernames and its layout fits inside the arena: every
   * place within limits.json's `arena.reach` of the origin along x and z, and `arena.height` above the floor.
   */
  checkFits (spec) {
    const { reach, height } = wireLimits(this.rules.limits).ranges.arena
    for (const agent of spec.agents) {
      const username = this.username(agent)
      if (username.length > 16) {
        throw badRequest(`agent ${JSON.stringify(agent)} in arena ${this.name} makes the username ${JSON.stringify(username)}, over Minecraft's 16 characters; use shorter agent or arena names`)
      }
    }
    const places = [
      ...spec.stations.flatMap(s => [[s.name, s.pos], ...s.cells.map(c => [s.name, c])]),
      ...spec.agents.map(a => [a, spec.positions[a]])
    ]
    for (const [what, [x, y, z]] of places) {
      if (Math.abs(x) > Math.min(reach.max, ARENA_REACH) || Math.abs(z) > Math.min(reach.max, ARENA_REACH)) {
        throw badRequest(`${what} at x=${x}, z=${z} lies outside the arena: keep |x| and |z| at most ${Math.min(reach.max, ARENA_REACH)} (limits.arena.reach)`)
      }
      if (y < height.min || y > height.max) {
        throw badRequest(`${what} at y=${y} lies outside the arena: keep y from ${height.min} to ${height.max} above the floor (limits.arena.height)`)
      }
    }
  }

  /** Quit every bot of this arena (a rebuild); queued skills end as their bots are gone. */
  async dropAll () {
    const bots = [...this.bots.entries()]
    for (const [name, bot] of bots) {
      this.log('world', `rebuilding: ${name} leaves`)
      try { bot.quit() } catch (err) { /* gone already */ }
    }
    await Promise.all(bots.map(([name, bot]) => waitFor(() => bot.gcEnded, REPLY_MS, `${name} to leave`).catch(() => {})))
    // skills of the dropped bots end within a skill timeout at the latest; the rebuild waits no longer
    await withTimeout(Promise.all([...this.queues.values()].map(q => q.tail)), this.skillTimeoutMs + REPLY_MS, 'skills of the dropped bots')
      .catch(() => { for (const name of this.queues.keys()) this.queues.set(name, new SerialQueue()) })
  }

  /**
   * Wait until every bot's own view agrees with the reset: its position, its inventory, the station blocks,
   * and where the other bots stand (a give aims at where the giver sees its peer: a stale view of a peer
   * that was just teleported throws the items where nobody is).
   */
  async settle (spec, stations) {
    const blocks = [...stations.values()].filter(s => BLOCK_STATIONS.has(s.kind))
    const siteCells = [...stations.values()].filter(s => s.kind === 'site').flatMap(s => s.cells)
    const targets = new Map(spec.agents.map(a => [a, this.absolute(spec.positions[a]).offset(0.5, 0, 0.5)]))
    await Promise.all(spec.agents.map(agent => {
      const bot = this.bots.get(agent)
      const target = targets.get(agent)
      const want = spec.inventories[agent]
      const peers = spec.agents.filter(a => a !== agent)
      const seesPeers = () => peers.every(peer => {
        const seen = bot.players[this.username(peer)]?.entity
        return seen && seen.position.distanceTo(targets.get(peer)) <= 0.5
      })
      // a peer the server has not yet shown at its new place is waited for a while; one never shown (out
      // of the bot's entity view) is no reason to fail the reset
      const peersSeen = waitFor(seesPeers, 2000, `${agent}'s view of its peers`)
        .catch(() => this.log('world', `${agent} does not see its peers at their reset positions`))
      return peersSeen.then(() => waitFor(() => {
        if (bot.entity.position.distanceTo(target) > 0.5) return false
        const items = bot.inventory.items()
        if (items.reduce((n, i) => n + i.count, 0) !== Object.values(want).reduce((a, b) => a + b, 0)) return false
        for (const [name, n] of Object.entries(want)) if (countOf(bot, name) !== n) return false
        if (blocks.some(s => bot.blockAt(s.pos)?.name !== s.kind)) return false
        return siteCells.every(c => bot.blockAt(c)?.name === 'air')
      }, REPLY_MS, `${agent}'s view of the reset arena`))
    }))
  }

  // ---------- execute ----------

  /** Check a skill call map; returns `{id, actor, op, args}` or throws BadRequest. */
  checkCall (call) {
    check.map(call, 'execute args')
    const id = check.string(String(call.id ?? ''), 'call id')
    const actor = check.string(call.actor, 'call actor')
    if (!this.bots.has(actor)) throw badRequest(`call actor ${JSON.stringify(actor)} is not an agent; agents are ${this.agents().join(', ')}`)
    const op = check.string(call.op, 'call op')
    const args = checkSkillArgs(this.rules.ops, this.registry, op, isMap(call.args) ? call.args : (call.args === undefined ? {} : call.args))
    return { id, actor, op, args }
  }

  /**
   * A bot simulates its physics (20 times a second: gravity, collisions, the pathfinder's checks) only
   * while it has a skill queued or running, or a reset or read-back of its arena runs (an external
   * server's read-back walks to each container); a bot that waits for its next call stands still anyway.
   * A profile of 8 arenas: the idle bots' physics were 15 % of the sidecar's CPU.
   */
  holdPhysics (actor, delta) {
    const n = (this.busy.get(actor) || 0) + delta
    this.busy.set(actor, n)
    const bot = this.bots.get(actor)
    if (bot) bot.physicsEnabled = n > 0
  }

  /** Run `fn` with every bot's physics on; afterwards only bots with skills to do keep them. */
  async withPhysics (fn) {
    for (const bot of this.bots.values()) bot.physicsEnabled = true
    try {
      return await fn()
    } finally {
      for (const agent of this.bots.keys()) this.holdPhysics(agent, 0)
    }
  }

  /** Run one checked call on its bot's queue; resolves to the list of events it produced. */
  execute (call) {
    if (!this.layout) throw badRequest('execute before reset: send reset with the episode spec first')
    const { id, actor, op, args } = call
    this.holdPhysics(actor, +1)
    return this.queues.get(actor).run(async () => {
      const bot = this.bots.get(actor)
      if (isDisconnected(bot)) throw new ArenaFault(`${actor}'s bot is disconnected (${await whyEnded(bot)})`)
      const epoch = this.epoch
      const event = { call_id: id, actor, op, ok: true, kind: 'skill', reason: '', data: {}, actions: noActions() }
      const meter = meterOf(bot)
      const ctx = {
        bot, actor, world: this, registry: this.registry, rules: this.rules, timeoutMs: this.skillTimeoutMs, actions: meter,
        barrier: () => this.barrierFor(bot)
      }
      const counted = meter.snapshot()
      const started = Date.now()
      let onEnd = null
      const ended = new Promise((resolve, reject) => {
        onEnd = () => whyEnded(bot).then(why => reject(new ArenaFault(`${actor}'s bot disconnected during ${op} (${why})`)))
        bot.once('end', onEnd)
      })
      ended.catch(() => {})
      try {
        event.data = await Promise.race([SKILLS[op].run(ctx, args), ended])
      } catch (err) {
        if (err instanceof ArenaFault || isDisconnected(bot)) {
          this.log('skill', `${actor} ${op}: ${err.message}`)
          throw err instanceof ArenaFault ? err : new ArenaFault(`${actor}'s bot disconnected during ${op} (${await whyEnded(bot)}): ${err.message}`)
        }
        if (!(err instanceof SkillFailure) && !(err instanceof TimeoutError)) this.log('skill', `${actor} ${op} raised: ${err.stack}`)
        bot.pathfinder?.setGoal(null)
        if (bot.currentWindow) bot.closeWindow(bot.currentWindow)
        Object.assign(event, { ok: false, reason: err.message, data: {} })
        // The peer's await_handoff learns of this at once instead of waiting out its timeout.
        if (op === 'give' && epoch === this.epoch) this.failedGives.push({ from: actor, to: args.to, item: args.item, count: args.count, call_id: id, reason: err.message })
      } finally {
        bot.removeListener('end', onEnd)
      }
      event.data = { ...event.data, ms: Date.now() - started }
      event.actions = meter.since(counted)
      this.log('skill', `${actor} ${op} ${JSON.stringify(args)} -> ${event.ok ? 'ok' : 'FAILED: ' + event.reason} (${event.data.ms} ms)`)
      const events = [event]
      if (event.ok && op === 'await_handoff') {
        const { handoff, inventories_before: before, inventories_after: after, ...own } = event.data
        event.data = own
        events.push({
          call_id: id, actor, op, ok: true, kind: 'handoff', reason: '',
          data: { from: args.from, to: actor, item: args.item, count: args.count, inventories_before: before, inventories_after: after },
          actions: noActions()
        })
      }
      return events
    }).finally(() => this.holdPhysics(actor, -1))
  }

  // ---------- observe ----------

  /** Ground truth read after a barrier. Site cells are relative `[x, y, z, block]`, air left out. */
  async observe () {
    return this.exclusive(async () => {
      await this.barrier()
      const truth = await this.withPhysics(() => this.arena.read(this))
      for (const s of this.stations()) {
        if (s.kind !== 'site') continue
        const names = truth.sites[s.name]
        truth.sites[s.name] = s.cells
          .map((c, i) => [...this.relative(c), names[i]])
          .filter(cell => cell[3] !== 'air')
          .sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2])
      }
      return truth
    })
  }

  async close () {
    for (const bot of this.bots.values()) { try { bot.quit() } catch (err) { /* gone already */ } }
    this.bots.clear()
  }
}

module.exports = { World, ArenaFault, BLOCK_STATIONS, ARENA_REACH, ARENA_HALF_WIDTH }
