'use strict'
// The arena: the embedded server, one bot per agent, and the episode's layout. Owns reset
// (server-side edits, all logged), skill execution (serialized per bot, concurrent across bots),
// the ordering barrier and ground-truth observation.

const { Vec3 } = require('vec3')
const { connectBot, isDisconnected } = require('./bots')
const { parseSpec } = require('./spec')
const { SKILLS, SkillFailure, checkSkillArgs, countOf } = require('./skills')
const { badRequest, isMap } = require('./protocol')
const { check } = require('./validate')
const { SerialQueue, withTimeout, waitFor, TimeoutError } = require('./util')

const BLOCK_STATIONS = new Set(['chest', 'crafting_table', 'furnace'])

class World {
  /**
   * @param {object} o
   * @param o.serv flying-squid server, o.api its `serv.gencoord`, o.port its port, o.floorY arena floor height
   * @param o.log logger, o.skillTimeoutMs budget per skill step (walking, waiting for a handoff)
   */
  constructor ({ serv, api, port, floorY, log, skillTimeoutMs = 20000 }) {
    Object.assign(this, { serv, api, port, floorY, log, skillTimeoutMs })
    this.registry = serv.registry
    this.bots = new Map()
    this.queues = new Map()
    this.layout = null // {stations: Map name -> {name, kind, pos: Vec3, cells: [Vec3]}}
    this.consumed = new Map() // handoff ledger entries already claimed by an await_handoff
    this.syncCounter = 0
  }

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
      this.bots.set(name, await connectBot(name, this.port, this.log))
      if (!this.queues.has(name)) this.queues.set(name, new SerialQueue())
    }))
    return missing
  }

  agents () { return [...this.bots.keys()] }
  bot (name) { return this.bots.get(name) || null }
  player (name) {
    const p = this.api.playerByName(name)
    if (!p) throw new Error(`${name} is not connected to the server; reset to rejoin it`)
    return p
  }

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
  cookTicks () { return this.api.cookTicks() }

  // ---------- server truth ----------

  serverCount (agent, item) { return this.api.inventoryCounts(this.player(agent))[item] || 0 }
  serverBlockNames (positions) { return this.api.blockNames(positions) }

  /** Claim `count` items handed from `from` to `to` (ledger of server-side pickups); true once claimed. */
  takeHandoff (from, to, item, count) {
    const key = `${from}>${to}>${item}`
    const received = this.api.pickups().filter(p => p.from === from && p.to === to && p.item === item).reduce((n, p) => n + p.count, 0)
    const used = this.consumed.get(key) || 0
    if (received - used < count) return false
    this.consumed.set(key, used + count)
    return true
  }

  /** Ordering barrier for one bot: the server has applied every earlier packet of it. */
  async barrierFor (bot) {
    const token = `${bot.username}-${++this.syncCounter}`
    const reply = new Promise(resolve => {
      const onMessage = message => {
        if (message.includes('sync:' + token)) { bot.removeListener('messagestr', onMessage); resolve() }
      }
      bot.on('messagestr', onMessage)
    })
    bot.chat('/sync ' + token)
    await withTimeout(reply, 5000, `barrier for ${bot.username}`)
  }

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
      this.layout = { stations }
      this.api.clearDrops()
      this.api.clearPickups()
      this.consumed.clear()

      // Blocks: remove whatever anyone placed that is not a station of this episode, then place stations.
      const wanted = new Map()
      for (const s of stations.values()) if (BLOCK_STATIONS.has(s.kind)) wanted.set(`${s.pos}`, s)
      const siteCells = [...stations.values()].filter(s => s.kind === 'site').flatMap(s => s.cells)
      const toClear = [...this.api.touchedPositions(), ...siteCells].filter(p => !wanted.has(`${p}`))
      const clearNames = await this.api.blockNames(toClear)
      for (let i = 0; i < toClear.length; i++) if (clearNames[i] !== 'air') await this.api.setBlock(toClear[i], 'air')
      for (const s of wanted.values()) {
        if (await this.api.blockName(s.pos) !== s.kind) await this.api.setBlock(s.pos, s.kind)
        if (s.kind === 'chest') this.api.setContainer('chest', s.pos, spec.containers[s.name] || {})
        if (s.kind === 'furnace') this.api.setContainer('furnace', s.pos, {})
      }
      this.api.setCookTicks(spec.cookTicks || 1)

      for (const agent of spec.agents) {
        const player = this.player(agent)
        this.api.setInventory(player, spec.inventories[agent])
        await this.api.teleport(player, this.absolute(spec.positions[agent]))
      }
      await this.settle(spec, stations)
      return { ms: Date.now() - start, rejoined }
    })
  }

  /** Wait until every bot's own view agrees with the server: position, inventory, station blocks. */
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
    const args = checkSkillArgs(this.registry, op, isMap(call.args) ? call.args : (call.args === undefined ? {} : call.args))
    return { id, actor, op, args }
  }

  /** Run one checked call on its bot's queue; resolves to the list of events it produced. */
  execute (call) {
    if (!this.layout) throw badRequest('execute before reset: send reset with the episode spec first')
    const { id, actor, op, args } = call
    return this.queues.get(actor).run(async () => {
      const bot = this.bots.get(actor)
      const event = { call_id: id, actor, op, ok: true, kind: 'skill', reason: '', data: {} }
      const ctx = {
        bot, actor, world: this, api: this.api, registry: this.registry, timeoutMs: this.skillTimeoutMs,
        barrier: () => this.barrierFor(bot)
      }
      const started = Date.now()
      try {
        if (isDisconnected(bot)) throw new SkillFailure(`${actor} is disconnected; reset rejoins it`)
        event.data = await SKILLS[op].run(ctx, args)
      } catch (err) {
        if (!(err instanceof SkillFailure) && !(err instanceof TimeoutError)) this.log('skill', `${actor} ${op} raised: ${err.stack}`)
        bot.pathfinder?.setGoal(null)
        if (bot.currentWindow) bot.closeWindow(bot.currentWindow)
        Object.assign(event, { ok: false, reason: err.message, data: {} })
      }
      event.data = { ...event.data, ms: Date.now() - started }
      this.log('skill', `${actor} ${op} ${JSON.stringify(args)} -> ${event.ok ? 'ok' : 'FAILED: ' + event.reason} (${event.data.ms} ms)`)
      const events = [event]
      if (event.ok && op === 'await_handoff') {
        delete event.data.handoff
        events.push({
          call_id: id, actor, op, ok: true, kind: 'handoff', reason: '',
          data: { from: args.from, to: actor, item: args.item, count: args.count }
        })
      }
      return events
    })
  }

  // ---------- observe ----------

  /** Ground truth read from the server after a barrier. Site cells are relative `[x, y, z, block]`. */
  async observe () {
    return this.exclusive(async () => {
      await this.barrier()
      const inventories = {}
      for (const agent of this.agents()) inventories[agent] = this.api.inventoryCounts(this.player(agent))
      const containers = {}
      const sites = {}
      const furnaces = {}
      for (const s of (this.layout ? this.layout.stations.values() : [])) {
        if (s.kind === 'chest') containers[s.name] = this.api.containerCounts(s.pos)
        else if (s.kind === 'furnace') furnaces[s.name] = this.api.furnaceCounts(s.pos)
        else if (s.kind === 'site') {
          const names = await this.api.blockNames(s.cells)
          sites[s.name] = s.cells
            .map((c, i) => [...this.relative(c), names[i]])
            .filter(cell => cell[3] !== 'air')
            .sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2])
        }
      }
      return { inventories, containers, sites, furnaces }
    })
  }

  async close () {
    for (const bot of this.bots.values()) { try { bot.quit() } catch (err) { /* gone already */ } }
    this.bots.clear()
  }
}

module.exports = { World }
