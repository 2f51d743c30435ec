'use strict'
// The embedded arena: flying-squid runs in this process with our game-logic plugin, so resets are
// direct server-side edits (each logged) and ground truth is read from the server's own state. One
// instance serves one arena (one World): its edits, pickups and furnaces are those inside the arena's
// region or of its own bots, so several arenas share one server without touching each other.

const { withTimeout, REPLY_MS } = require('../util')

const BLOCK_STATIONS = new Set(['chest', 'crafting_table', 'furnace'])
/** A toss counts as aimed at its receiver within this many degrees of the line between them. */
const TOSS_AIM_DEGREES = 20
/** Blocks between where a bot stands and where the server has it for the two to count as one place. */
const AIM_POSITION_TOLERANCE = 0.25

class EmbeddedArena {
  /** @param o.serv flying-squid server, o.api its `serv.gencoord`, o.port its port, o.floorY arena floor height */
  constructor ({ serv, api, port, floorY }) {
    Object.assign(this, { serv, api, port, floorY, host: '127.0.0.1' })
    this.registry = serv.registry
    this.consumed = new Map() // handoff ledger entries already claimed by an await_handoff
    this.syncCounter = 0
    this.world = null
    this.furnaceCookTicks = null // this arena's cook time, set at each reset
  }

  /** The World this arena serves (its bots' usernames, its region). */
  bind (world) { this.world = world }

  /** Called once per connected bot; the embedded arena needs nothing from it. */
  attach () {}

  player (agent) {
    const p = this.api.playerByName(this.world.username(agent))
    if (!p) throw new Error(`${agent} is not connected to the server; reset to rejoin it`)
    return p
  }

  /** True for ledger entries between two bots of this arena. */
  ownPickup (p) {
    const mine = new Set(this.world.agents().map(a => this.world.username(a)))
    return mine.has(p.from) || mine.has(p.to)
  }

  count (agent, item) { return this.inventory(agent)[item] || 0 }
  /** The agent's items as the server holds them: `{item: n}`. */
  inventory (agent) { return this.api.inventoryCounts(this.player(agent)) }
  blockNames (positions) { return this.api.blockNames(positions) }
  cookTicks () { return this.furnaceCookTicks ?? this.api.cookTicks() }

  /** The give's toss about to happen is meant for `to`: no other bot of the arena picks it up. */
  reserveToss (from, to) { this.api.reserveTosses(this.world.username(from), this.world.username(to)) }

  /** The giver's side of a handoff: the server's pickup ledger already has the evidence. */
  recordToss () {}

  /** Claim `count` items handed from `from` to `to` (ledger of server-side pickups); true once claimed. */
  takeHandoff (from, to, item, count) {
    const key = `${from}>${to}>${item}`
    const [giver, taker] = [this.world.username(from), this.world.username(to)]
    const received = this.api.pickups().filter(p => p.from === giver && p.to === taker && p.item === item).reduce((n, p) => n + p.count, 0)
    const used = this.consumed.get(key) || 0
    if (received - used < count) return false
    this.consumed.set(key, used + count)
    return true
  }

  /**
   * True when a toss by `from` would now fly at `to` as the server has them: the server's position of
   * `from` is `at` (where its own bot stands) and its look points at `to` within TOSS_AIM_DEGREES.
   */
  tossAimed (from, to, at) {
    const giver = this.player(from)
    const receiver = this.player(to)
    if (giver.position.distanceTo(at) > AIM_POSITION_TOLERANCE) return false
    const dir = this.api.tossDirection(giver)
    const dx = receiver.position.x - giver.position.x
    const dz = receiver.position.z - giver.position.z
    const norm = Math.hypot(dir.x, dir.z) * Math.hypot(dx, dz)
    return norm > 0 && (dir.x * dx + dir.z * dz) / norm > Math.cos(TOSS_AIM_DEGREES * Math.PI / 180)
  }

  /** Where the items `from` tossed for `to` of `item` lie (absolute positions, server truth). */
  dropsOf (from, to, item) {
    const [giver, taker] = [this.world.username(from), this.world.username(to)]
    return Object.values(this.serv.entities)
      .filter(e => e.gcItem && e.gcItem.name === item && e.gcThrower === giver && (!e.gcFor || e.gcFor === taker) && this.world.inRegion(e.position))
      .map(e => e.position.clone())
  }

  /** Where the agent and every dropped item of this arena are, for a handoff that never arrived. */
  describeDrops (agent) {
    const at = this.player(agent).position
    const items = Object.values(this.serv.entities).filter(e => e.gcItem && this.world.inRegion(e.position))
      .map(e => `${e.gcItem.count} ${e.gcItem.name} at ${e.position.x.toFixed(2)} ${e.position.y.toFixed(2)} ${e.position.z.toFixed(2)}`)
    return `${agent} at ${at.x.toFixed(2)} ${at.y.toFixed(2)} ${at.z.toFixed(2)}; items: ${items.join(', ') || 'none'}`
  }

  /** Ordering barrier for one bot: `/sync <token>` is answered once the server applied its earlier packets. */
  async barrierFor (bot) {
    const token = `${bot.username}-${++this.syncCounter}`
    const reply = new Promise(resolve => {
      const onMessage = message => {
        if (message.includes('sync:' + token)) { bot.removeListener('messagestr', onMessage); resolve() }
      }
      bot.on('messagestr', onMessage)
    })
    bot.chat('/sync ' + token)
    await withTimeout(reply, REPLY_MS, `barrier for ${bot.username}`)
  }

  /** Server-side edits for one episode: blocks, container contents, inventories, positions. */
  async arrange (world, spec, stations) {
    const api = this.api
    const inRegion = pos => world.inRegion(pos)
    api.clearDrops(inRegion)
    api.clearPickups(p => this.ownPickup(p))
    this.consumed.clear()

    // Blocks: remove whatever anyone placed in this arena that is not a station of this episode, then
    // place stations.
    const wanted = new Map()
    for (const s of stations.values()) if (BLOCK_STATIONS.has(s.kind)) wanted.set(`${s.pos}`, s)
    const siteCells = [...stations.values()].filter(s => s.kind === 'site').flatMap(s => s.cells)
    const toClear = [...api.touchedPositions().filter(inRegion), ...siteCells].filter(p => !wanted.has(`${p}`))
    const clearNames = await api.blockNames(toClear)
    for (let i = 0; i < toClear.length; i++) if (clearNames[i] !== 'air') await api.setBlock(toClear[i], 'air')
    this.furnaceCookTicks = Math.max(1, spec.cookTicks || 1)
    for (const s of wanted.values()) {
      if (await api.blockName(s.pos) !== s.kind) await api.setBlock(s.pos, s.kind)
      if (s.kind === 'chest') api.setContainer('chest', s.pos, spec.containers[s.name] || {})
      if (s.kind === 'furnace') {
        api.setContainer('furnace', s.pos, {})
        api.setCookTicks(this.furnaceCookTicks, [api.findContainer(s.pos)])
      }
    }

    for (const agent of spec.agents) {
      const player = this.player(agent)
      api.setInventory(player, spec.inventories[agent])
      await api.teleport(player, world.absolute(spec.positions[agent]))
    }
    // Stock flying-squid shows players to each other when they move, not when they are teleported: a bot
    // that came from far away (the lobby, a rebuild) would stay unseen, or seen where it was, by its peer,
    // which then walks and tosses towards the wrong place. Show everyone here to everyone now (with the
    // sidecar's per-arena view, plugin/interest.js, each teleport has done so already).
    for (const agent of spec.agents) this.player(agent).updateAndSpawn()
  }

  /** Ground truth from the server's state (the caller has run the barrier). */
  async read (world) {
    const inventories = {}
    for (const agent of world.agents()) inventories[agent] = this.api.inventoryCounts(this.player(agent))
    const containers = {}
    const sites = {}
    const furnaces = {}
    for (const s of world.stations()) {
      if (s.kind === 'chest') containers[s.name] = this.api.containerCounts(s.pos)
      else if (s.kind === 'furnace') furnaces[s.name] = this.api.furnaceCounts(s.pos)
      else if (s.kind === 'site') sites[s.name] = await this.blockNames(s.cells)
    }
    return { inventories, containers, sites, furnaces }
  }
}

module.exports = { EmbeddedArena, BLOCK_STATIONS }
