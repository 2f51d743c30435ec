'use strict'
// The arena's episode logic, the same for every server: one bot per agent, the episode's layout,
// reset, skill execution (serialized per bot, concurrent across bots), the ordering barrier and
// ground-truth observation. What depends on the server (how the world is edited at reset and where
// ground truth comes from) is the arena's job: `arenas/embedded.js` (our flying-squid with its plugin)
// or `arenas/external.js` (any Minecraft 1.21.4 server, through operator commands and the bots' views).

const { Vec3 } = require('vec3')
const { connectBot, isDisconnected } = require('./bots')
const { parseSpec } = require('./spec')
const { SKILLS, SkillFailure, checkSkillArgs, checkSkillTable, countOf } = require('./skills')
const { meterOf, noActions } = require('./actions')
const { badRequest, isMap } = require('./protocol')
const { check } = require('./validate')
const { SerialQueue, waitFor, TimeoutError } = require('./util')
const { EmbeddedArena, BLOCK_STATIONS } = require('./arenas/embedded')

class World {
  /**
   * @param {object} o
   * @param o.arena an EmbeddedArena or ExternalArena; for the embedded server `{serv, api, port, floorY}`
   *   may be passed instead and the arena is built from them
   * @param o.rules the rule tables (rules.js `loadRules`): calls are checked against `rules.ops`
   * @param o.log logger, o.skillTimeoutMs budget per skill step (walking, waiting for a handoff)
   */
  constructor ({ arena, serv, api, port, floorY, rules, log, skillTimeoutMs = 20000 }) {
    if (!rules || !rules.ops || !rules.recipes) throw new Error('World needs the rule tables: pass rules = loadRules(dir) (src/rules.js)')
    checkSkillTable(rules.ops)
    this.arena = arena || new EmbeddedArena({ serv, api, port, floorY })
    Object.assign(this, { rules, log, skillTimeoutMs })
    this.registry = this.arena.registry
    this.bots = new Map()
    this.queues = new Map()
    this.layout = null // {stations: Map name -> {name, kind, pos: Vec3, cells: [Vec3]}}
    this.failedGives = [] // gives that failed this episode, each claimed by at most one await_handoff
    this.tosses = [] // tosses whose items are not all received yet: {from, to, item, left, before}, oldest first
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
    await Promise.all(missing.map(async name => {
      const old = this.bots.get(name)
      if (old) { this.log('world', `rejoining ${name} (its connection dropped)`); old.end() }
      const bot = await connectBot(name, this.arena.port, this.log, { host: this.arena.host })
      this.bots.set(name, bot)
      await this.arena.attach(bot)
      if (!this.queues.has(name)) this.queues.set(name, new SerialQueue())
    }))
    return missing
  }

  /** Test-only: cut one bot's connection as a network fault would (the next reset rejoins it). */
  async dropBot (name) {
    const bot = this.bots.get(name)
    if (!bot) throw badRequest(`drop_bot: ${JSON.stringify(name)} is not an agent; agents are ${this.agents().join(', ')}`)
    if (isDisconnected(bot)) return false
    this.log('world', `dropping ${name}'s connection (test op)`)
    bot._client.end('dropped by the drop_bot test op')
    await waitFor(() => bot.gcEnded, 5000, `${name} disconnected`)
    return true
  }

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

  absolute ([x, y, z]) { return new Vec3(x, y + this.floorY, z) }
  relative (v) { return [v.x, v.y - this.floorY, v.z] }
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
    const toss = { from, to, item, left: count, before }
    this.tosses.push(toss)
    return toss
  }

  /** The toss did not happen after all. */
  forgetToss (toss) { this.tosses = this.tosses.filter(t => t !== toss) }

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

  async barrier () {
    await Promise.all([...this.bots.values()].filter(b => !isDisconnected(b)).map(b => this.barrierFor(b)))
    return true
  }

  // ---------- reset ----------

  async reset (rawSpec) {
    const spec = parseSpec(this.registry, rawSpec)
    return this.exclusive(async () => {
      const start = Date.now()
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
      await this.arena.arrange(this, spec, stations, previous)
      await this.settle(spec, stations)
      return { ms: Date.now() - start, rejoined }
    })
  }

  /** Wait until every bot's own view agrees with the reset: position, inventory, station blocks. */
  async settle (spec, stations) {
    const blocks = [...stations.values()].filter(s => BLOCK_STATIONS.has(s.kind))
    const siteCells = [...stations.values()].filter(s => s.kind === 'site').flatMap(s => s.cells)
    await Promise.all(spec.agents.map(agent => {
      const bot = this.bots.get(agent)
      const target = this.absolute(spec.positions[agent]).offset(0.5, 0, 0.5)
      const want = spec.inventories[agent]
      return waitFor(() => {
        if (bot.entity.position.distanceTo(target) > 0.5) return false
        const items = bot.inventory.items()
        if (items.reduce((n, i) => n + i.count, 0) !== Object.values(want).reduce((a, b) => a + b, 0)) return false
        for (const [name, n] of Object.entries(want)) if (countOf(bot, name) !== n) return false
        if (blocks.some(s => bot.blockAt(s.pos)?.name !== s.kind)) return false
        return siteCells.every(c => bot.blockAt(c)?.name === 'air')
      }, 5000, `${agent}'s view of the reset arena`)
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

  /** Run one checked call on its bot's queue; resolves to the list of events it produced. */
  execute (call) {
    if (!this.layout) throw badRequest('execute before reset: send reset with the episode spec first')
    const { id, actor, op, args } = call
    return this.queues.get(actor).run(async () => {
      const bot = this.bots.get(actor)
      const event = { call_id: id, actor, op, ok: true, kind: 'skill', reason: '', data: {}, actions: noActions() }
      const meter = meterOf(bot)
      const ctx = {
        bot, actor, world: this, registry: this.registry, rules: this.rules, timeoutMs: this.skillTimeoutMs, actions: meter,
        barrier: () => this.barrierFor(bot)
      }
      const counted = meter.snapshot()
      const started = Date.now()
      try {
        if (isDisconnected(bot)) throw new SkillFailure(`${actor} is disconnected; reset rejoins it`)
        event.data = await SKILLS[op].run(ctx, args)
      } catch (err) {
        if (!(err instanceof SkillFailure) && !(err instanceof TimeoutError)) this.log('skill', `${actor} ${op} raised: ${err.stack}`)
        bot.pathfinder?.setGoal(null)
        if (bot.currentWindow) bot.closeWindow(bot.currentWindow)
        Object.assign(event, { ok: false, reason: err.message, data: {} })
        // The peer's await_handoff learns of this at once instead of waiting out its timeout.
        if (op === 'give') this.failedGives.push({ from: actor, to: args.to, item: args.item, count: args.count, call_id: id, reason: err.message })
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
    })
  }

  // ---------- observe ----------

  /** Ground truth read after a barrier. Site cells are relative `[x, y, z, block]`, air left out. */
  async observe () {
    return this.exclusive(async () => {
      await this.barrier()
      const truth = await this.arena.read(this)
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

module.exports = { World, BLOCK_STATIONS }
