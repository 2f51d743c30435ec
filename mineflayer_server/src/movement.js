'use strict'
// How a bot moves for a skill: pathfinder walks that end as soon as the bot is in reach, instant looks,
// and the aim a toss needs before it is thrown. A walk that fails is the skill's failure (failure.js).

const { once } = require('events')
const { goals } = require('mineflayer-pathfinder')
const { sleep, withTimeout, waitFor } = require('./util')
const { fail } = require('./failure')

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
/** After the look packet is out, a server whose state we cannot read is given this long to apply it before the toss clicks arrive. */
const LOOK_SETTLE_MS = 50
/** Blocks the look point moves to make a look the server missed differ, so that it is sent again. */
const AIM_NUDGE = 0.05

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
  try {
    if (to && arena && arena.tossAimed) {
      await serverAim(ctx, arena, point, to)
    } else {
      for (let i = 0; i < 2; i++) await withTimeout(once(bot, 'physicsTick'), ctx.timeoutMs, 'a physics tick before the toss')
      await sleep(LOOK_SETTLE_MS)
    }
  } catch (err) {
    fail(`${ctx.actor} could not face the receiver: ${err.message}`)
  }
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

/**
 * Where a bot that stops pressing keys now comes to rest: on the ground each tick keeps 0.546 of the
 * horizontal speed (vanilla friction), so it slides on by speed / (1 - 0.546).
 */
function restingAt (bot) {
  const v = bot.entity.velocity
  return bot.entity.position.offset(v.x / (1 - 0.546), 0, v.z / (1 - 0.546))
}

module.exports = { TOSS_RANGE, walkTo, walkNear, face, faceForToss, restingAt }
