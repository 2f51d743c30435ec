'use strict'
// Skills: the dispatch table from a skill-call op to real Mineflayer actions; calls are checked against
// the op table shared with the Python world (skill_ops.json, see rules.js) before they run.
// A skill never edits the world by command; it walks, clicks, tosses, crafts and places like a
// player. What an agent got wrong (missing items, wrong station, timeout) is a SkillFailure: the
// caller turns it into an event with ok:false. Bad arguments are protocol errors (BadRequest).
// Every walk, toss and placement a skill starts is counted on `ctx.actions` (actions.js), which counts
// window clicks by itself.

const { Vec3 } = require('vec3')
const { goals } = require('mineflayer-pathfinder')
const { check } = require('./validate')
const { badRequest } = require('./protocol')
const { sleep, withTimeout, waitFor, REPLY_MS } = require('./util')
const { farthestFirst, EYE_HEIGHT } = require('./standpoint')
const { SkillFailure, fail } = require('./failure')
const { TOSS_RANGE, walkTo, walkNear, face, faceForToss, restingAt } = require('./movement')
const { placeableRun, walkToBuild, placeOn } = require('./building')

/**
 * A toss's items lying this long after the throw without reaching the receiver are out of its pickup
 * range (they landed in flight within about a second; a vanilla server lets a thrown item be picked up
 * after 2 s), and the receiver walks onto them, as a player would.
 */
const COLLECT_AFTER_MS = 2500
/** The receiver walks only to items of its handoff lying within this many blocks of it. */
const COLLECT_RANGE = 6

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

module.exports = { SKILLS, SkillFailure, checkSkillArgs, checkSkillTable, countOf }
