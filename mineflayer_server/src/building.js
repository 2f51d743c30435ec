'use strict'
// How a bot builds: where it can place the next cells of a site from (standpoint.js plans it), the walk
// there, and one block placed on the top face of the block below its cell.

const { Vec3 } = require('vec3')
const { goals } = require('mineflayer-pathfinder')
const { withTimeout, REPLY_MS } = require('./util')
const { planStandpoint, reachableRun, clickPoint, PLACE_REACH } = require('./standpoint')
const { walkTo, face, restingAt } = require('./movement')
const { fail } = require('./failure')

/**
 * Build walks aim this much inside the placing reach, so that cells reached at the end of a walk stay
 * in reach however the bot settles (without it, a cell at the very edge is lost again and costs a walk).
 */
const BUILD_REACH_MARGIN = 0.3

/**
 * True when the bot can place the first `n` of `cells` both from where it is and from where it comes to
 * rest (in reach, in sight, never into its own body), so it may place while still sliding.
 */
function canPlaceRun (bot, cells, n = 1, reach = PLACE_REACH) {
  return placeableRun(bot, cells.slice(0, n), reach) === n
}

/** The longest run of the first `cells` the bot can place both from where it is and from where it comes to rest. */
function placeableRun (bot, cells, reach = PLACE_REACH) {
  const solid = solidView(bot)
  const [here, rest] = [bot.entity.position, restingAt(bot)]
  let n = reachableRun(here, cells, solid, { reach })
  while (n > 0 && reachableRun(rest, cells.slice(0, n), solid, { reach }, n) !== n) n = reachableRun(here, cells.slice(0, n - 1), solid, { reach })
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

module.exports = { canPlaceRun, placeableRun, walkToBuild, placeOn }
