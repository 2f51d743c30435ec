'use strict'
// Skills: the dispatch table from a skill-call op to argument checks and real Mineflayer actions.
// A skill never edits the world by command; it walks, clicks, tosses, crafts and places like a
// player. What an agent got wrong (missing items, wrong station, timeout) is a SkillFailure: the
// caller turns it into an event with ok:false. Bad arguments are protocol errors (BadRequest).

const { Vec3 } = require('vec3')
const { goals } = require('mineflayer-pathfinder')
const { check } = require('./validate')
const { badRequest } = require('./protocol')
const { sleep, withTimeout, waitFor } = require('./util')

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

async function walkTo (ctx, goal, what) {
  const bot = ctx.bot
  if (goal.isEnd(bot.entity.position.floored())) return
  try {
    await withTimeout(bot.pathfinder.goto(goal), ctx.timeoutMs, what)
  } catch (err) {
    bot.pathfinder.setGoal(null)
    fail(`could not walk to ${what}: ${err.message}`)
  }
}

const walkNear = (ctx, pos, what, range = 2) => walkTo(ctx, new goals.GoalNear(pos.x, pos.y, pos.z, range), what)

function needItems (ctx, item, count) {
  const have = countOf(ctx.bot, item)
  if (have < count) fail(`${ctx.actor} has ${have} ${item}, needs ${count}`)
}

async function withWindow (ctx, open, use) {
  const window = await withTimeout(open(), 5000, 'open window')
  try {
    return await use(window)
  } finally {
    ctx.bot.closeWindow(window)
  }
}

const itemArgs = (station = true) => (registry, args) => ({
  ...(station ? { station: check.string(args.station, 'args.station') } : {}),
  item: check.item(registry, args.item, 'args.item'),
  count: check.count(args.count, 'args.count')
})

/** op -> {args: (registry, args) -> checked args, run: (ctx, args) -> data}. */
const SKILLS = {
  goto: {
    args: (registry, args) => ({ station: check.string(args.station, 'args.station') }),
    async run (ctx, { station: name }) {
      const s = station(ctx, name)
      await walkNear(ctx, s.pos, `station ${name}`)
      return { station: name }
    }
  },

  withdraw: {
    args: itemArgs(),
    async run (ctx, { station: name, item, count }) {
      const s = station(ctx, name, 'chest')
      await walkNear(ctx, s.pos, `station ${name}`)
      const block = stationBlock(ctx, s)
      const id = ctx.registry.itemsByName[item].id
      await withWindow(ctx, () => ctx.bot.openContainer(block), async chest => {
        const have = chest.containerItems().filter(i => i.name === item).reduce((n, i) => n + i.count, 0)
        if (have < count) fail(`chest ${name} holds ${have} ${item}, needs ${count}`)
        await withTimeout(chest.withdraw(id, null, count), 5000, 'withdraw clicks')
      })
      await ctx.barrier()
      return { station: name, item, count }
    }
  },

  deposit: {
    args: itemArgs(),
    async run (ctx, { station: name, item, count }) {
      const s = station(ctx, name, 'chest')
      needItems(ctx, item, count)
      await walkNear(ctx, s.pos, `station ${name}`)
      const block = stationBlock(ctx, s)
      const id = ctx.registry.itemsByName[item].id
      await withWindow(ctx, () => ctx.bot.openContainer(block), chest =>
        withTimeout(chest.deposit(id, null, count), 5000, 'deposit clicks'))
      await ctx.barrier()
      return { station: name, item, count }
    }
  },

  give: {
    args: (registry, args) => ({ to: check.string(args.to, 'args.to'), ...itemArgs(false)(registry, args) }),
    async run (ctx, { to, item, count }) {
      if (to === ctx.actor) fail(`${ctx.actor} cannot give items to itself`)
      const peer = ctx.world.bot(to)
      if (!peer) fail(`no agent named ${JSON.stringify(to)} in this episode`)
      needItems(ctx, item, count)
      await walkNear(ctx, peer.entity.position.floored(), to)
      await ctx.bot.lookAt(peer.entity.position.offset(0, 1.0, 0), true)
      await sleep(100) // the server throws in the last look direction it has seen
      await withTimeout(ctx.bot.toss(ctx.registry.itemsByName[item].id, null, count), 5000, 'toss')
      ctx.world.recordToss(ctx.actor, to, item, count)
      await ctx.barrier()
      return { to, item, count }
    }
  },

  await_handoff: {
    args: (registry, args) => ({ from: check.string(args.from, 'args.from'), ...itemArgs(false)(registry, args) }),
    async run (ctx, { from, item, count }) {
      if (!ctx.world.bot(from) || from === ctx.actor) fail(`no peer named ${JSON.stringify(from)} to receive from`)
      // Done when the items arrived; failed at once when the peer's give failed (no need to wait it out).
      let outcome
      try {
        outcome = await waitFor(() => {
          if (ctx.world.takeHandoff(from, ctx.actor, item, count)) return { received: true }
          const failedGive = ctx.world.takeFailedGive(from, ctx.actor, item)
          return failedGive ? { failedGive } : null
        }, ctx.timeoutMs, `${count} ${item} from ${from}`, 20)
      } catch (err) {
        fail(`${ctx.actor} did not receive ${count} ${item} from ${from}: ${err.message}`)
      }
      if (outcome.failedGive) {
        const g = outcome.failedGive
        fail(`${ctx.actor} did not receive ${count} ${item} from ${from}: ${from}'s give of ${g.count} ${g.item} (call ${g.call_id}) failed: ${g.reason}`)
      }
      // the server has the items; let the client's view catch up before the next skill reads it
      await waitFor(() => countOf(ctx.bot, item) >= ctx.world.serverCount(ctx.actor, item), 3000, 'inventory update').catch(() => {})
      return { from, to: ctx.actor, item, count, handoff: true }
    }
  },

  craft: {
    args: (registry, args) => ({
      item: check.item(registry, args.item, 'args.item'),
      count: check.count(args.count, 'args.count'),
      station: check.string(args.station ?? '', 'args.station', { allowEmpty: true })
    }),
    async run (ctx, { item, count, station: name }) {
      const bot = ctx.bot
      const id = ctx.registry.itemsByName[item].id
      let table = null
      if (name) {
        const s = station(ctx, name, 'crafting_table')
        await walkNear(ctx, s.pos, `station ${name}`)
        table = stationBlock(ctx, s)
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
    args: (registry, args) => ({ site: check.string(args.site, 'args.site'), ...itemArgs(false)(registry, args) }),
    async run (ctx, { site, item, count }) {
      const bot = ctx.bot
      const s = station(ctx, site, 'site')
      if (!ctx.registry.blocksByName[item]) fail(`${item} is not a placeable block`)
      needItems(ctx, item, count)
      const names = await ctx.world.serverBlockNames(s.cells)
      const free = s.cells.filter((_, i) => names[i] === 'air')
      if (free.length < count) fail(`site ${site} has ${free.length} free cells, needs ${count}`)
      const placed = []
      for (const cell of free.slice(0, count)) {
        await walkTo(ctx, new goals.GoalPlaceBlock(cell, bot.world, { range: 4, faces: [new Vec3(0, -1, 0)] }), `a spot to place at ${cell}`)
        const below = bot.blockAt(cell.offset(0, -1, 0))
        if (!below || below.boundingBox !== 'block') fail(`nothing to place on below ${cell}`)
        try {
          await bot.equip(ctx.registry.itemsByName[item].id, 'hand')
          await withTimeout(bot.placeBlock(below, new Vec3(0, 1, 0)), 5000, `place ${item}`)
        } catch (err) {
          fail(`placing ${item} at ${cell} failed: ${err.message}`)
        }
        placed.push(ctx.world.relative(cell))
      }
      await ctx.barrier()
      return { site, item, count, cells: placed }
    }
  },

  furnace_input: furnaceLoad('input'),
  furnace_fuel: furnaceLoad('fuel'),

  furnace_output: {
    args: itemArgs(),
    async run (ctx, { station: name, item, count }) {
      const s = station(ctx, name, 'furnace')
      await walkNear(ctx, s.pos, `station ${name}`)
      const block = stationBlock(ctx, s)
      const id = ctx.registry.itemsByName[item].id
      const budget = ctx.timeoutMs + count * ctx.world.cookTicks() * 50 * 2
      await withWindow(ctx, () => ctx.bot.openFurnace(block), async furnace => {
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
        }), 5000, 'take output')
      })
      await ctx.barrier()
      return { station: name, item, count }
    }
  },

  wait: {
    args: (registry, args) => ({ ticks: check.count(args.ticks, 'args.ticks', { min: 0, max: 20 * 60 }) }),
    async run (ctx, { ticks }) {
      await sleep(ticks * 50)
      return { ticks }
    }
  }
}

function furnaceLoad (slot) {
  return {
    args: itemArgs(),
    async run (ctx, { station: name, item, count }) {
      const s = station(ctx, name, 'furnace')
      needItems(ctx, item, count)
      await walkNear(ctx, s.pos, `station ${name}`)
      const block = stationBlock(ctx, s)
      const id = ctx.registry.itemsByName[item].id
      await withWindow(ctx, () => ctx.bot.openFurnace(block), furnace =>
        withTimeout(slot === 'input' ? furnace.putInput(id, null, count) : furnace.putFuel(id, null, count), 5000, `put ${slot}`))
      await ctx.barrier()
      return { station: name, item, count, slot }
    }
  }
}

/** Check a skill call's op and args; returns the checked args or throws BadRequest. */
function checkSkillArgs (registry, op, args) {
  const skill = SKILLS[op]
  if (!skill) throw badRequest(`unknown skill op ${JSON.stringify(op)}; expected one of ${Object.keys(SKILLS).join(', ')}`)
  check.map(args, 'call args')
  return skill.args(registry, args)
}

module.exports = { SKILLS, SkillFailure, checkSkillArgs, countOf }
