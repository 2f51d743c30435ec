'use strict'
// Skills: the dispatch table from a skill-call op to real Mineflayer actions; calls are checked against
// the op table shared with the Python world (skill_ops.json, see rules.js) before they run.
// A skill never edits the world by command; it walks, clicks, tosses, crafts and places like a
// player. What an agent got wrong (missing items, wrong station, timeout) is a SkillFailure: the
// caller turns it into an event with ok:false. Bad arguments are protocol errors (BadRequest).
// Every walk, toss and placement a skill starts is counted on `ctx.actions` (actions.js), which counts
// window clicks by itself.

const { once } = require('events')
const { Vec3 } = require('vec3')
const { goals } = require('mineflayer-pathfinder')
const { check } = require('./validate')
const { badRequest } = require('./protocol')
const { sleep, withTimeout, waitFor, REPLY_MS } = require('./util')
const { planStandpoint, reachableRun, farthestFirst, clickPoint, PLACE_REACH, EYE_HEIGHT } = require('./standpoint')

/**
 * Feet-block distance within which a bot uses a chest, table or furnace without walking: the station
 * block then lies within vanilla's 4.5-block interaction range of the eye, so walks end at the nearest
 * spot from which the station can be used rather than next to it.
 */
const REACH = 4
/**
 * Feet-block distance from the receiver within which the giver tosses: the stack lands about two blocks
 * ahead of the thrower and is picked up within 1.5 blocks, so the receiver never has to move.
 */
const TOSS_RANGE = 2.5
/**
 * Build walks aim this much inside the placing reach, so that cells reached at the end of a walk stay
 * in reach however the bot settles (without it, a cell at the very edge is lost again and costs a walk).
 */
const BUILD_REACH_MARGIN = 0.3
/** After the look packet is out, a server whose state we cannot read is given this long to apply it before the toss clicks arrive. */
const LOOK_SETTLE_MS = 50
/** Blocks the look point moves to make a look the server missed differ, so that it is sent again. */
const AIM_NUDGE = 0.05
/**
 * A toss's items lying this long after the throw without reaching the receiver are out of its pickup
 * range (they landed in flight within about a second; a vanilla server lets a thrown item be picked up
 * after 2 s), and the receiver walks onto them, as a player would.
 */
const COLLECT_AFTER_MS = 2500
/** The receiver walks only to items of its handoff lying within this many blocks of it. */
const COLLECT_RANGE = 6

/** The skill could not be done; `reason` says why. Becomes an event with ok:false. */
class SkillFailure extends Error {
  constructor (reason) {
    super(reason)
    this.name = 'SkillFailure'
  }
}
const fail = reason => { throw new SkillFailure(reason) }

const countOf = (bot, name) => bot.inventory.items().filter(i => i.name === name).reduce((n, i) => n + i.count, 0)

/** Station lookup that fails as a value: a plan may name a station the layout lacks. */
function station (ctx, name, kind) {
  const s = ctx.world.station(name)
  if (!s) fail(`no station named ${JSON.stringify(name)} in this layout`)
  if (kind && s.kind !== kind) fail(`station ${name} is a ${s.kind}, not a ${kind}`)
  return s
}

/** The block of a station as the bot sees it, checked to be the expected kind. */
function stationBlock (ctx, s) {
  const block = ctx.bot.blockAt(s.pos)
  if (!block || block.name !== s.kind) fail(`station ${s.name} has no ${s.kind} (found ${block ? block.name : 'nothing'})`)
  return block
}

/**
 * Walk with the pathfinder (sprinting where the path allows) until `goal` is reached or, checked every
 * physics tick, `arrived()` holds for where the bot actually is: a walk to a station or a peer ends as
 * soon as the bot is in reach, not at the centre of the path's last block.
 */
async function walkTo (ctx, goal, what, arrived = null) {
  const bot = ctx.bot
  if (goal.isEnd(bot.entity.position.floored()) || (arrived && arrived())) return
  let onTick = null
  const early = arrived && new Promise(resolve => {
    onTick = () => { if (arrived()) resolve('arrived') }
    bot.on('physicsTick', onTick)
  })
  try {
    ctx.actions.add('walks')
    const walk = bot.pathfinder.goto(goal)
    walk.catch(() => {}) // a walk ended early rejects with GoalChanged, which is no failure
    const how = await withTimeout(early ? Promise.race([walk, early]) : walk, ctx.timeoutMs, what)
    if (how === 'arrived') bot.pathfinder.setGoal(null)
  } catch (err) {
    bot.pathfinder.setGoal(null)
    fail(`could not walk to ${what}: ${err.message}`)
  } finally {
    if (onTick) bot.removeListener('physicsTick', onTick)
  }
}

function walkNear (ctx, pos, what, range = REACH) {
  const goal = new goals.GoalNear(pos.x, pos.y, pos.z, range)
  return walkTo(ctx, goal, what, () => goal.isEnd(ctx.bot.entity.position.floored()))
}

/**
 * Turn to `point` at once. Mineflayer's own looks before a click turn at a capped speed, up to a second
 * for a half turn; looking at the same point first makes theirs a no-op. The server does not check the
 * look for block clicks; only a toss needs the look applied first (see `faceForToss`).
 */
const face = (bot, point) => bot.lookAt(point, true)

/**
 * Face `point` and wait until the server has applied the look (and the position the walk ended at), so a
 * toss flies that way: a toss thrown on the server's older state flies from where the walk began or along
 * the last look (seen in loaded test runs: the items lay 1.7 blocks from the receiver, or went back to the
 * giver). Where the arena can read the server's state (embedded), the wait ends as soon as the server has
 * the giver where its bot stands and looking at `to` (one physics tick sends the look, the server applies
 * it on arrival); a look the server has not taken within a second is sent again. Elsewhere (an external
 * server) the look goes out in the update of a physics tick: after two ticks it is sent, and the server is
 * given LOOK_SETTLE_MS to apply it. On a starved machine ticks come seconds late; the wait lasts as long as
 * the skill's budget allows.
 */
async function faceForToss (ctx, point, to = null) {
  const bot = ctx.bot
  await face(bot, point)
  const arena = ctx.world && ctx.world.arena
  const readsAim = Boolean(to && arena && arena.tossAimed)
  try {
    if (readsAim) {
      await serverAim(ctx, arena, point, to)
    } else {
      for (let i = 0; i < 2; i++) await withTimeout(once(bot, 'physicsTick'), ctx.timeoutMs, 'a physics tick before the toss')
    }
  } catch (err) {
    fail(`${ctx.actor} could not face the receiver: ${err.message}`)
  }
  if (!readsAim) await sleep(LOOK_SETTLE_MS)
}

/** Wait until the server has the giver aimed at `to`; a look it has not taken within a second is sent again. */
async function serverAim (ctx, arena, point, to) {
  const started = Date.now()
  let resent = started
  let nudge = AIM_NUDGE
  await waitFor(async () => {
    if (arena.tossAimed(ctx.actor, to, ctx.bot.entity.position)) return true
    if (Date.now() - resent > 1000) { // a look that changes is sent at the next tick
      resent = Date.now()
      nudge = -nudge
      await face(ctx.bot, point.offset(nudge, 0, 0))
    }
    return false
  }, ctx.timeoutMs, `the server to have ${ctx.actor} where it stands, looking at ${to}`)
  const waited = Date.now() - started
  if (waited > 100) ctx.world.log('skill', `${ctx.actor} waited ${waited} ms for the server to have its aim at ${to}`)
}

/** Open a chest or furnace window (mineflayer looks at the block centre first). */
async function openStation (ctx, block, open) {
  await face(ctx.bot, block.position.offset(0.5, 0.5, 0.5))
  return open(block)
}

function needItems (ctx, item, count) {
  const have = countOf(ctx.bot, item)
  if (have < count) fail(`${ctx.actor} has ${have} ${item}, needs ${count}`)
}

async function withWindow (ctx, open, use) {
  const window = await withTimeout(open(), REPLY_MS, 'open window')
  try {
    return await use(window)
  } finally {
    ctx.bot.closeWindow(window)
  }
}

/**
 * Where a bot that stops pressing keys now comes to rest: on the ground each tick keeps 0.546 of the
 * horizontal speed (vanilla friction), so it slides on by speed / (1 - 0.546).
 */
function restingAt (bot) {
  const v = bot.entity.velocity
  return bot.entity.position.offset(v.x / (1 - 0.546), 0, v.z / (1 - 0.546))
}

/**
 * True when the bot can place the first `n` of `cells` both from where it is and from where it comes to
 * rest (in reach, in sight, never into its own body), so it may place while still sliding.
 */
function canPlaceRun (bot, cells, n = 1, reach = PLACE_REACH) {
  const run = cells.slice(0, n)
  const solid = solidView(bot)
  return reachableRun(bot.entity.position, run, solid, { reach }) === n && reachableRun(restingAt(bot), run, solid, { reach }) === n
}

/** The longest run of the first `cells` the bot can place both from where it is and from where it comes to rest. */
function placeableRun (bot, cells) {
  const solid = solidView(bot)
  const [here, rest] = [bot.entity.position, restingAt(bot)]
  let n = reachableRun(here, cells, solid)
  while (n > 0 && reachableRun(rest, cells.slice(0, n), solid, {}, n) !== n) n = reachableRun(here, cells.slice(0, n - 1), solid)
  return n
}

/**
 * Solidity as the bot sees the world: blocks that stop a ray or a body (none where its chunk is not
 * loaded). Read by block state, without building a Block: a standpoint plan asks thousands of times.
 */
function solidView (bot) {
  const solid = solidStates(bot.registry)
  const at = new Vec3(0, 0, 0)
  return (x, y, z) => solid[bot.world.getBlockStateId(at.set(x, y, z))] === 1
}

const solidByRegistry = new WeakMap()
/** 1 at each block state id whose bounding box is a full block. */
function solidStates (registry) {
  let solid = solidByRegistry.get(registry)
  if (!solid) {
    solid = new Uint8Array(registry.blocksArray.reduce((n, b) => Math.max(n, b.maxStateId + 1), 0))
    for (const b of registry.blocksArray) if (b.boundingBox === 'block') solid.fill(1, b.minStateId, b.maxStateId + 1)
    solidByRegistry.set(registry, solid)
  }
  return solid
}

/**
 * Walk (if need be) to the standpoint that reaches the longest run of `cells`; false when none reaches
 * even the first. Nobody stands in a cell column of the site or where another bot stands.
 */
async function walkToBuild (ctx, s, cells) {
  const bot = ctx.bot
  const others = ctx.world.agents().filter(n => n !== ctx.actor).map(n => ctx.world.bot(n))
    .filter(b => b && b.entity).map(b => b.entity.position.floored())
  const avoid = [...s.cells, ...others]
  const reach = PLACE_REACH - BUILD_REACH_MARGIN
  const { stand, covers } = planStandpoint({ cells, from: restingAt(bot), solid: solidView(bot), avoid, reach })
  if (!covers) return canPlaceRun(bot, cells)
  if (stand) {
    // stop as soon as the whole run is in reach, not at the centre of the standpoint
    await walkTo(ctx, new goals.GoalBlock(stand.x, stand.y, stand.z), `a spot to build at ${cells[0]}`,
      () => canPlaceRun(bot, cells, covers, reach))
  }
  return canPlaceRun(bot, cells)
}

/** Place `item` on the top face of the block below `cell` (looking there first, at once). */
async function placeOn (ctx, cell, item) {
  const bot = ctx.bot
  const below = bot.blockAt(cell.offset(0, -1, 0))
  if (!below || below.boundingBox !== 'block') fail(`nothing to place on below ${cell}`)
  try {
    await bot.equip(ctx.registry.itemsByName[item].id, 'hand')
    await face(bot, clickPoint(cell))
    await withTimeout(bot.placeBlock(below, new Vec3(0, 1, 0)), REPLY_MS, `place ${item}`)
    ctx.actions.add('placements')
  } catch (err) {
    fail(`placing ${item} at ${cell} failed: ${err.message}`)
  }
}

/**
 * Walk onto the nearest lying items of `toss` (a give to this bot whose items did not reach it: thrown
 * from too close or too far, or flown past it between two server ticks). The toss is not walked to
 * again before another COLLECT_AFTER_MS; the await goes on until the items arrive or its time is up.
 */
async function collectToss (ctx, toss) {
  ctx.world.tossCollected(toss)
  const here = ctx.bot.entity.position
  const drops = ctx.world.arena.dropsOf(toss.from, ctx.actor, toss.item)
    .filter(p => p.distanceTo(here) <= COLLECT_RANGE)
    .sort((p, q) => p.distanceTo(here) - q.distanceTo(here))
  if (!drops.length) return
  ctx.world.log('skill', `${ctx.actor} walks to the ${toss.item} ${toss.from} tossed: ${drops[0].distanceTo(here).toFixed(2)} blocks away`)
  await walkNear(ctx, drops[0].floored(), `the ${toss.item} ${toss.from} tossed`, 0.5)
}

/**
 * op -> {run: (ctx, args) -> data}. Which ops exist and which arguments each takes is the op table
 * (skill_ops.json, read by rules.js), the one the Python world checks its calls against too.
 */
const SKILLS = {
  goto: {
    async run (ctx, { station: name }) {
      const s = station(ctx, name)
      if (s.kind === 'site') {
        // next to a site means where building it can begin: in reach and sight of its next free cell
        // (the place that follows walks on only if its later cells are out of reach from there)
        const names = await ctx.world.serverBlockNames(s.cells)
        const next = s.cells.find((_, i) => names[i] === 'air')
        if (next && await walkToBuild(ctx, s, [next])) return { station: name }
      }
      await walkNear(ctx, s.pos, `station ${name}`)
      return { station: name }
    }
  },

  withdraw: {
    async run (ctx, { station: name, item, count }) {
      const s = station(ctx, name, 'chest')
      await walkNear(ctx, s.pos, `station ${name}`)
      const block = stationBlock(ctx, s)
      const id = ctx.registry.itemsByName[item].id
      await withWindow(ctx, () => openStation(ctx, block, b => ctx.bot.openContainer(b)), async chest => {
        const have = chest.containerItems().filter(i => i.name === item).reduce((n, i) => n + i.count, 0)
        if (have < count) fail(`chest ${name} holds ${have} ${item}, needs ${count}`)
        await withTimeout(chest.withdraw(id, null, count), REPLY_MS, 'withdraw clicks')
      })
      await ctx.barrier()
      return { station: name, item, count }
    }
  },

  deposit: {
    async run (ctx, { station: name, item, count }) {
      const s = station(ctx, name, 'chest')
      needItems(ctx, item, count)
      await walkNear(ctx, s.pos, `station ${name}`)
      const block = stationBlock(ctx, s)
      const id = ctx.registry.itemsByName[item].id
      await withWindow(ctx, () => openStation(ctx, block, b => ctx.bot.openContainer(b)), chest =>
        withTimeout(chest.deposit(id, null, count), REPLY_MS, 'deposit clicks'))
      await ctx.barrier()
      return { station: name, item, count }
    }
  },

  give: {
    async run (ctx, { to, item, count }) {
      if (to === ctx.actor) fail(`${ctx.actor} cannot give items to itself`)
      const peer = ctx.world.bot(to)
      if (!peer) fail(`no agent named ${JSON.stringify(to)} in this episode`)
      needItems(ctx, item, count)
      // the receiver stands still; the giver comes only as close as a toss carries
      await walkNear(ctx, peer.entity.position.floored(), to, TOSS_RANGE)
      await faceForToss(ctx, peer.entity.position.offset(0, 1.0, 0), to) // the server throws along its last look
      // noted before the toss: the server may report the pickup before the toss's own promise resolves
      const toss = ctx.world.noteToss(ctx.actor, to, item, count, ctx.world.inventories())
      try {
        await ctx.actions.toss(() => withTimeout(ctx.bot.toss(ctx.registry.itemsByName[item].id, null, count), REPLY_MS, 'toss'))
      } catch (err) {
        ctx.world.forgetToss(toss)
        throw err
      }
      ctx.world.recordToss(ctx.actor, to, item, count)
      ctx.world.tossThrown(toss)
      await ctx.barrier()
      return { to, item, count }
    }
  },

  await_handoff: {
    async run (ctx, { from, item, count }) {
      if (!ctx.world.bot(from) || from === ctx.actor) fail(`no peer named ${JSON.stringify(from)} to receive from`)
      // Done when the items arrived; failed at once when the peer's give failed (no need to wait it out).
      // Items of a toss that landed out of reach are walked to (see COLLECT_AFTER_MS), then the wait goes on.
      const deadline = Date.now() + ctx.timeoutMs
      let outcome
      try {
        outcome = await waitFor(async () => {
          if (ctx.world.takeHandoff(from, ctx.actor, item, count)) return { received: true }
          const failedGive = ctx.world.takeFailedGive(from, ctx.actor, item)
          if (failedGive) return { failedGive }
          const lying = ctx.world.lyingToss(from, ctx.actor, item, COLLECT_AFTER_MS)
          if (lying) await collectToss({ ...ctx, timeoutMs: Math.max(1, deadline - Date.now()) }, lying)
          return null
        }, ctx.timeoutMs, `${count} ${item} from ${from}`, 20)
      } catch (err) {
        if (ctx.world.arena.describeDrops) ctx.world.log('skill', `handoff not received: ${ctx.world.arena.describeDrops(ctx.actor)}`)
        fail(`${ctx.actor} did not receive ${count} ${item} from ${from}: ${err.message}`)
      }
      if (outcome.failedGive) {
        const g = outcome.failedGive
        fail(`${ctx.actor} did not receive ${count} ${item} from ${from}: ${from}'s give of ${g.count} ${g.item} (call ${g.call_id}) failed: ${g.reason}`)
      }
      // the server has the items; let the client's view catch up before the next skill reads it
      await waitFor(() => countOf(ctx.bot, item) >= ctx.world.serverCount(ctx.actor, item), 3000, 'inventory update').catch(() => {})
      // both agents' inventories before the toss and now; world.execute moves them to the handoff event
      const before = ctx.world.claimToss(from, ctx.actor, item, count)
      return { from, to: ctx.actor, item, count, handoff: true, inventories_before: before, inventories_after: ctx.world.inventories() }
    }
  },

  craft: {
    async run (ctx, { item, count, station: name }) {
      const bot = ctx.bot
      const id = ctx.registry.itemsByName[item].id
      let table = null
      if (name) {
        const s = station(ctx, name, 'crafting_table')
        await walkNear(ctx, s.pos, `station ${name}`)
        table = stationBlock(ctx, s)
        await face(bot, table.position.offset(0.5, 0.5, 0.5)) // bot.craft opens the table looking at it
      }
      const known = bot.recipesAll(id, null, table)
      if (!known.length) {
        if (!table && bot.recipesAll(id, null, true).length) fail(`${item} needs a crafting table`)
        fail(`there is no recipe for ${item}`)
      }
      const times = Math.ceil(count / known[0].result.count)
      const recipe = bot.recipesFor(id, null, times, table)[0]
      if (!recipe) fail(`${ctx.actor} lacks the ingredients to craft ${count} ${item}`)
      const before = ctx.world.serverCount(ctx.actor, item)
      try {
        await withTimeout(bot.craft(recipe, times, table), ctx.timeoutMs, `craft ${item}`)
      } catch (err) {
        if (bot.currentWindow) bot.closeWindow(bot.currentWindow)
        fail(`crafting ${item} failed: ${err.message}`)
      }
      await ctx.barrier()
      const made = ctx.world.serverCount(ctx.actor, item) - before
      if (made < count) fail(`crafting ${item} produced ${made}, expected ${count}`)
      return { item, count: made, station: name }
    }
  },

  place: {
    async run (ctx, { site, item, count }) {
      const bot = ctx.bot
      const s = station(ctx, site, 'site')
      if (!ctx.rules.recipes.blocks.includes(item)) fail(`${item} does not place as a block; blocks are ${ctx.rules.recipes.blocks.join(', ')}`)
      needItems(ctx, item, count)
      const names = await ctx.world.serverBlockNames(s.cells)
      const free = s.cells.filter((_, i) => names[i] === 'air')
      if (free.length < count) fail(`site ${site} has ${free.length} free cells, needs ${count}`)
      const todo = free.slice(0, count) // fill order, as the sim world fills
      const placed = []
      while (todo.length) {
        if (!await walkToBuild(ctx, s, todo)) {
          // no standpoint sees the next cell: let the pathfinder search for one
          await walkTo(ctx, new goals.GoalPlaceBlock(todo[0], bot.world, { range: 4, faces: [new Vec3(0, -1, 0)] }), `a spot to place at ${todo[0]}`)
        }
        // the longest run of the next cells placeable from here (at least the next one, which the walk
        // was for), clicked farthest first; then re-plan for the rest
        const run = todo.splice(0, Math.max(1, placeableRun(bot, todo)))
        for (const cell of farthestFirst(restingAt(bot).offset(0, EYE_HEIGHT, 0), run)) await placeOn(ctx, cell, item)
        placed.push(...run.map(cell => ctx.world.relative(cell)))
      }
      await ctx.barrier()
      return { site, item, count, cells: placed }
    }
  },

  furnace_input: furnaceLoad('input'),
  furnace_fuel: furnaceLoad('fuel'),

  furnace_output: {
    async run (ctx, { station: name, item, count }) {
      const s = station(ctx, name, 'furnace')
      await walkNear(ctx, s.pos, `station ${name}`)
      const block = stationBlock(ctx, s)
      const id = ctx.registry.itemsByName[item].id
      const budget = ctx.timeoutMs + count * ctx.world.cookTicks() * 50 * 2
      await withWindow(ctx, () => openStation(ctx, block, b => ctx.bot.openFurnace(b)), async furnace => {
        try {
          await waitFor(() => {
            const out = furnace.outputItem()
            return out && out.type === id && out.count >= count
          }, budget, `${count} ${item} in the output`, 20)
        } catch (err) {
          const out = furnace.outputItem()
          fail(`furnace ${name} output has ${out ? `${out.count} ${out.name}` : 'nothing'}, waited for ${count} ${item}`)
        }
        await withTimeout(ctx.bot.transfer({
          window: furnace,
          itemType: id,
          metadata: null,
          count,
          sourceStart: 2,
          sourceEnd: 3,
          destStart: furnace.inventoryStart,
          destEnd: furnace.inventoryEnd
        }), REPLY_MS, 'take output')
      })
      await ctx.barrier()
      return { station: name, item, count }
    }
  },

  wait: {
    async run (ctx, { ticks }) {
      await sleep(ticks * 50)
      return { ticks }
    }
  }
}

function furnaceLoad (slot) {
  return {
    async run (ctx, { station: name, item, count }) {
      const s = station(ctx, name, 'furnace')
      needItems(ctx, item, count)
      await walkNear(ctx, s.pos, `station ${name}`)
      const block = stationBlock(ctx, s)
      const id = ctx.registry.itemsByName[item].id
      await withWindow(ctx, () => openStation(ctx, block, b => ctx.bot.openFurnace(b)), furnace =>
        withTimeout(slot === 'input' ? furnace.putInput(id, null, count) : furnace.putFuel(id, null, count), REPLY_MS, `put ${slot}`))
      await ctx.barrier()
      return { station: name, item, count, slot }
    }
  }
}

/**
 * Check a skill call against the op table `ops` (rules.js): a known op, exactly its arguments, each of its
 * type. Returns the checked args or throws BadRequest.
 */
function checkSkillArgs (ops, registry, op, args) {
  const types = typeof op === 'string' && Object.hasOwn(ops, op) ? ops[op] : null
  if (!types) throw badRequest(`unknown skill op ${JSON.stringify(op)}; expected one of ${Object.keys(ops).join(', ')}`)
  check.map(args, 'call args')
  const names = Object.keys(types)
  check.keys(args, names, `${op} args`)
  const missing = names.filter(name => !Object.hasOwn(args, name))
  if (missing.length) throw badRequest(`${op} args lack ${missing.join(', ')}; expected exactly ${names.join(', ')}`)
  return Object.fromEntries(names.map(name => [name, check.arg(registry, types[name], args[name], `args.${name}`)]))
}

/** Throws unless the op table `ops` and SKILLS name the same ops: every op needs a skill and vice versa. */
function checkSkillTable (ops) {
  const missing = Object.keys(ops).filter(op => !Object.hasOwn(SKILLS, op))
  const extra = Object.keys(SKILLS).filter(op => !Object.hasOwn(ops, op))
  if (missing.length || extra.length) {
    throw new Error(`the op table (skill_ops.json) and src/skills.js disagree: ${missing.length ? `no skill runs ${missing.join(', ')}` : ''}` +
      `${missing.length && extra.length ? '; ' : ''}${extra.length ? `skill_ops.json lacks ${extra.join(', ')}` : ''}`)
  }
}

module.exports = { SKILLS, SkillFailure, checkSkillArgs, checkSkillTable, countOf, faceForToss }
