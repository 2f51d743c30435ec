'use strict'
// The external arena: the bots join a Minecraft 1.21.4 server we do not control (the official server
// in offline mode, or another flying-squid), which runs none of our plugin. So:
// - reset is done with operator commands the bots send (/kill, /setblock, /clear, /give, /tp): the bots
//   must be operators there. Chest contents are put in by a bot that /gives itself the items and
//   deposits them through the chest window, because vanilla has no portable command for container
//   contents. Skills never send commands.
// - ground truth is what the bots observe: inventories from their own windows, blocks from their world
//   view, chest and furnace contents by walking to each and opening it (one walk and one window round
//   trip per container per observe).
// - the ordering barrier is a command-suggestion request (`tab_complete`): the server answers it on the
//   bot's connection after applying every earlier packet of that bot, so the answer proves the bot's
//   earlier clicks are applied and that every update the server sent before it has arrived.
// - a handoff's evidence is the receiver's own pickups (`collect` packets naming it as the collector)
//   matched against the giver's tosses, instead of the embedded server's pickup ledger.
// One instance serves one arena: its commands name its own bots and only touch its own region (the
// item /kill is limited to the arena's volume), so several arenas share one external server.

const { Vec3 } = require('vec3')
const { goals } = require('mineflayer-pathfinder')
const { MINECRAFT_VERSION } = require('../server')
const { BLOCK_STATIONS } = require('./embedded')
const { ARENA_HALF_WIDTH } = require('../world')
const { withTimeout, waitFor, REPLY_MS } = require('../util')

const VANILLA_COOK_TICKS = 200
const AROUND = [[0, 1], [0, -1], [1, 0], [-1, 0], [1, 1], [-1, -1], [1, -1], [-1, 1], [0, 2], [2, 0], [0, -2], [-2, 0]]
const posKey = p => `${p.x},${p.y},${p.z}`

/** Items the bot owns as its client sees them: inventory slots 1-45 (slot 0 is a craft preview) and the cursor. */
function ownedCounts (bot) {
  const counts = {}
  const add = item => { if (item && item.count > 0) counts[item.name] = (counts[item.name] || 0) + item.count }
  bot.inventory.slots.forEach((item, slot) => { if (slot > 0) add(item) })
  add(bot.inventory.selectedItem)
  return counts
}

const itemCounts = items => {
  const out = {}
  for (const item of items) if (item && item.count > 0) out[item.name] = (out[item.name] || 0) + item.count
  return out
}

class ExternalArena {
  /** @param o.host, o.port the server; o.log logger */
  constructor ({ host, port, log }) {
    Object.assign(this, { host, port, log })
    this.registry = require('prismarine-registry')(MINECRAFT_VERSION)
    this.floorY = null
    this.world = null
    this.bots = new Map() // agent name -> bot, as attached
    this.tosses = [] // {from, to, item, count} recorded by the giver after its toss
    this.collects = [] // {to, item, count} from collect packets naming a bot as the collector
    this.consumed = new Map()
    this.syncId = 0
    this.warnedCookTicks = false
  }

  /** The World this arena serves (its bots' usernames, its region). */
  bind (world) { this.world = world }

  /** Track a (re)connected bot of agent `agent`; the first one finds the arena floor. */
  async attach (bot, agent) {
    this.bots.set(agent, bot)
    bot._client.on('collect', packet => {
      if (!bot.entity || packet.collectorEntityId !== bot.entity.id) return
      const entity = bot.entities[packet.collectedEntityId]
      let name = null
      try { name = entity && entity.getDroppedItem() ? entity.getDroppedItem().name : null } catch (err) { name = null }
      const from = name ? 'metadata' : 'last toss'
      // Without item metadata the pickup is attributed to the last toss aimed at this bot.
      if (!name) name = [...this.tosses].reverse().find(t => t.to === agent)?.item ?? null
      this.collects.push({ to: agent, item: name, count: packet.pickupItemCount || 1, from })
    })
    if (this.floorY === null) this.floorY = await this.findFloor(bot)
  }

  /**
   * First air layer above the ground under the bot where it joined, as it sees it. A flat world has the
   * same floor everywhere, so every arena of the server shares it.
   */
  async findFloor (bot) {
    const { x, z } = bot.entity.position.floored()
    const top = Math.floor(bot.entity.position.y) + 8
    await waitFor(() => bot.blockAt(new Vec3(x, top, z)), 10000, `the chunk at (${x}, ${z}) to load`)
    for (let y = top; y > -64; y--) {
      const block = bot.blockAt(new Vec3(x, y, z))
      if (block && !['air', 'void_air', 'cave_air'].includes(block.name)) return y + 1
    }
    throw new Error(`the external server's world has no ground at (${x}, ${z}); use a flat world`)
  }

  connected () { return [...this.bots.values()].find(b => !b.gcEnded && b.entity) || null }

  count (agent, item) { return this.inventory(agent)[item] || 0 }

  /** The agent's items as its own client sees them: `{item: n}`. */
  inventory (agent) {
    const bot = this.bots.get(agent)
    return bot ? ownedCounts(bot) : {}
  }

  async blockNames (positions) {
    const bot = this.connected()
    return positions.map(p => bot?.blockAt(p)?.name ?? 'unknown')
  }

  cookTicks () { return VANILLA_COOK_TICKS }

  recordToss (from, to, item, count) { this.tosses.push({ from, to, item, count }) }

  /**
   * Where items of `item` lie as the receiver `to` sees them (absolute positions). Who threw a dropped
   * item is not sent to clients; an item entity whose stack the server did not describe counts too.
   */
  dropsOf (from, to, item) {
    const bot = this.bots.get(to)
    if (!bot) return []
    const named = e => { try { const it = e.getDroppedItem(); return it ? it.name : null } catch (err) { return null } }
    return Object.values(bot.entities)
      .filter(e => e.name === 'item' && this.world.inRegion(e.position) && [item, null].includes(named(e)))
      .map(e => e.position.clone())
  }

  /** Claim `count` items handed from `from` to `to`: tossed by the giver and picked up by the receiver. */
  takeHandoff (from, to, item, count) {
    const key = `${from}>${to}>${item}`
    const tossed = this.tosses.filter(t => t.from === from && t.to === to && t.item === item).reduce((n, t) => n + t.count, 0)
    const picked = this.collects.filter(c => c.to === to && c.item === item).reduce((n, c) => n + c.count, 0)
    const used = this.consumed.get(key) || 0
    if (Math.min(tossed, picked) - used < count) return false
    this.consumed.set(key, used + count)
    return true
  }

  /** Ordering barrier for one bot: a `tab_complete` round trip, answered in order by any server. */
  async barrierFor (bot) {
    const transactionId = (this.syncId = (this.syncId % 0x7fffffff) + 1)
    const answered = new Promise(resolve => {
      const onReply = packet => {
        if (packet.transactionId === transactionId) { bot._client.removeListener('tab_complete', onReply); resolve() }
      }
      bot._client.on('tab_complete', onReply)
    })
    bot._client.write('tab_complete', { transactionId, text: '/' })
    await withTimeout(answered, REPLY_MS, `barrier for ${bot.username}`)
  }

  command (bot, text) {
    this.log('edit', `${bot.username}: ${text}`)
    bot.chat(text)
  }

  /** Reset by operator commands and, for chest contents, by a bot depositing items it was given. */
  async arrange (world, spec, stations, previous) {
    const bots = spec.agents.map(a => world.bot(a))
    const director = bots[0]
    this.tosses = []
    this.collects = []
    this.consumed.clear()
    if (spec.cookTicks !== VANILLA_COOK_TICKS && !this.warnedCookTicks) {
      this.warnedCookTicks = true
      this.log('world', `cook_ticks ${spec.cookTicks} ignored: an external server smelts in ${VANILLA_COOK_TICKS} ticks per item`)
    }
    // only this arena's items: other arenas of the server may have items in flight
    const { x: ox, z: oz } = world.origin
    const h = ARENA_HALF_WIDTH
    this.command(director, `/kill @e[type=minecraft:item,x=${ox - h},y=-64,z=${oz - h},dx=${2 * h - 1},dy=384,dz=${2 * h - 1}]`)

    // Blocks: stations of the last layout and all site cells become air, then this layout's stations are
    // placed. Chests and furnaces are always replaced, which empties them.
    const wanted = new Map()
    for (const s of stations.values()) if (BLOCK_STATIONS.has(s.kind)) wanted.set(posKey(s.pos), s)
    const cells = []
    for (const s of [...(previous ? previous.stations.values() : []), ...stations.values()]) {
      if (s.kind === 'site') cells.push(...s.cells)
      else if (BLOCK_STATIONS.has(s.kind)) cells.push(s.pos)
    }
    // the director edits what it sees: bring it into the arena first (bots join wherever the server spawns them)
    const start = world.absolute(spec.positions[spec.agents[0]])
    if (director.entity.position.distanceTo(start.offset(0.5, 0, 0.5)) > 16) {
      this.command(director, `/tp ${director.username} ${start.x + 0.5} ${start.y} ${start.z + 0.5}`)
      await this.barrierFor(director)
      await waitFor(() => cells.every(p => director.blockAt(p)), REPLY_MS, `${director.username}'s view of the arena`)
    }
    const cleared = new Set()
    const setBlock = (p, name) => this.command(director, `/setblock ${p.x} ${p.y} ${p.z} minecraft:${name}`)
    for (const p of cells) {
      const key = posKey(p)
      if (cleared.has(key)) continue
      cleared.add(key)
      const s = wanted.get(key)
      const seen = director.blockAt(p)?.name
      if (s && s.kind === 'crafting_table' && seen === 'crafting_table') continue
      if (seen !== 'air') setBlock(p, 'air')
      if (s) setBlock(p, s.kind)
    }
    await this.barrierFor(director)
    await waitFor(() => [...cleared].every(key => {
      const s = wanted.get(key)
      const [x, y, z] = key.split(',').map(Number)
      return director.blockAt(new Vec3(x, y, z))?.name === (s ? s.kind : 'air')
    }), REPLY_MS, `${director.username}'s view of the reset blocks`)

    for (const s of stations.values()) {
      const contents = spec.containers[s.name] || {}
      if (s.kind === 'chest' && Object.keys(contents).length) await this.fillChest(world, director, s, contents, stations)
    }

    for (const agent of spec.agents) {
      const bot = world.bot(agent)
      const at = world.absolute(spec.positions[agent])
      const name = bot.username
      this.command(bot, `/clear ${name}`)
      for (const [item, n] of Object.entries(spec.inventories[agent])) this.command(bot, `/give ${name} minecraft:${item} ${n}`)
      this.command(bot, `/tp ${name} ${at.x + 0.5} ${at.y} ${at.z + 0.5}`)
    }
    await Promise.all(bots.map(b => this.barrierFor(b)))
  }

  /** Put `contents` into a freshly placed chest: give them to the director, which deposits them. */
  async fillChest (world, bot, s, contents, stations) {
    const taken = new Set()
    for (const t of stations.values()) {
      if (t.kind === 'site') t.cells.forEach(c => taken.add(posKey(c)))
      else taken.add(posKey(t.pos))
    }
    const spot = AROUND.map(([dx, dz]) => s.pos.offset(dx, 0, dz)).find(p =>
      !taken.has(posKey(p)) && bot.blockAt(p)?.name === 'air' && bot.blockAt(p.offset(0, 1, 0))?.name === 'air' &&
      bot.blockAt(p.offset(0, -1, 0))?.boundingBox === 'block')
    if (!spot) throw new Error(`no free cell next to chest ${s.name} for a bot to stand on while filling it`)
    this.command(bot, `/clear ${bot.username}`)
    for (const [item, n] of Object.entries(contents)) this.command(bot, `/give ${bot.username} minecraft:${item} ${n}`)
    this.command(bot, `/tp ${bot.username} ${spot.x + 0.5} ${spot.y} ${spot.z + 0.5}`)
    await this.barrierFor(bot)
    const target = spot.offset(0.5, 0, 0.5)
    await waitFor(() => bot.entity.position.distanceTo(target) < 0.5 &&
      Object.entries(contents).every(([item, n]) => (ownedCounts(bot)[item] || 0) === n), REPLY_MS, `${bot.username} holding the contents of ${s.name}`)
    const chest = await withTimeout(bot.openContainer(bot.blockAt(s.pos)), REPLY_MS, `open chest ${s.name}`)
    try {
      const before = itemCounts(chest.containerItems())
      if (Object.keys(before).length) throw new Error(`chest ${s.name} still holds ${JSON.stringify(before)} after being replaced`)
      for (const [item, n] of Object.entries(contents)) {
        await withTimeout(chest.deposit(this.registry.itemsByName[item].id, null, n), REPLY_MS, `deposit ${n} ${item} into ${s.name}`)
      }
    } finally {
      bot.closeWindow(chest)
    }
    await this.barrierFor(bot)
  }

  /** Ground truth as the bots see it (the caller has run the barrier); opens every chest and furnace. */
  async read (world) {
    const inventories = {}
    for (const agent of world.agents()) inventories[agent] = ownedCounts(world.bot(agent))
    const containers = {}
    const sites = {}
    const furnaces = {}
    for (const s of world.stations()) {
      if (s.kind === 'site') sites[s.name] = await this.blockNames(s.cells)
      else if (s.kind === 'chest') containers[s.name] = await this.openAndRead(world, s, w => itemCounts(w.containerItems()))
      else if (s.kind === 'furnace') {
        furnaces[s.name] = await this.openAndRead(world, s, w => ({
          input: itemCounts([w.inputItem()]), fuel: itemCounts([w.fuelItem()]), output: itemCounts([w.outputItem()])
        }))
      }
    }
    return { inventories, containers, sites, furnaces }
  }

  /** The nearest bot walks to the container, opens it, reads it and closes it. */
  async openAndRead (world, s, readWindow) {
    const bots = world.agents().map(a => world.bot(a)).filter(b => !b.gcEnded && b.entity)
    if (!bots.length) throw new Error('no bot is connected to read the containers; reset rejoins them')
    const bot = bots.reduce((a, b) => (a.entity.position.distanceTo(s.pos) <= b.entity.position.distanceTo(s.pos) ? a : b))
    const goal = new goals.GoalNear(s.pos.x, s.pos.y, s.pos.z, 2)
    if (!goal.isEnd(bot.entity.position.floored())) {
      await withTimeout(bot.pathfinder.goto(goal), world.skillTimeoutMs, `${bot.username} walking to ${s.name} to read it`)
    }
    const block = bot.blockAt(s.pos)
    if (!block || block.name !== s.kind) return s.kind === 'furnace' ? { input: {}, fuel: {}, output: {} } : {}
    const window = await withTimeout(s.kind === 'furnace' ? bot.openFurnace(block) : bot.openContainer(block), REPLY_MS, `open ${s.name}`)
    try {
      return readWindow(window)
    } finally {
      bot.closeWindow(window)
    }
  }
}

module.exports = { ExternalArena, ownedCounts }
