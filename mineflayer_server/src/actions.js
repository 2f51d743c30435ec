'use strict'
// Executor actions: what a skill really made its bot do, counted where it happens, in the categories
// of the Python side's EXECUTOR_ACTIONS (gencoord_env/world/types.py), which counts the sim's logical
// actions in the same categories (gencoord_env/world/sim.py, "Executor actions"):
//
//   walks          a pathfinder walk started (skills.js walkTo; none when the bot is already in reach; a
//                  receiver's walk onto a toss that landed out of its reach counts too)
//   window_clicks  a window_click packet the bot sent, except those of a toss
//   tosses         a toss of a give's items (the clicks that pick the stack up and throw it are part of it)
//   placements     a block placed
//
// Window clicks are counted on the wire because mineflayer issues most of them itself (transfers,
// crafting, equipping) through a function of its own that nothing outside can wrap.

const CATEGORIES = Object.freeze(['walks', 'window_clicks', 'tosses', 'placements'])

/** Every category at zero: a handoff event's count (its call's skill event holds the actions). */
const noActions = () => Object.fromEntries(CATEGORIES.map(c => [c, 0]))

class ActionMeter {
  /** Count this bot's actions from now on; `meterOf` makes one per bot. */
  constructor (bot) {
    this.counts = noActions()
    this.tossing = 0
    const client = bot._client
    const write = client.write.bind(client)
    client.write = (name, params) => {
      if (name === 'window_click' && !this.tossing) this.counts.window_clicks++
      return write(name, params)
    }
  }

  add (category, n = 1) {
    if (!Object.hasOwn(this.counts, category)) throw new Error(`unknown executor action ${category}; categories are ${CATEGORIES.join(', ')}`)
    this.counts[category] += n
  }

  snapshot () { return { ...this.counts } }

  /** Actions since `snapshot()` returned `start`. */
  since (start) { return Object.fromEntries(CATEGORIES.map(c => [c, this.counts[c] - start[c]])) }

  /** Run the toss `fn`; its clicks count as one toss (when it succeeds), not as window clicks. */
  async toss (fn) {
    this.tossing++
    try {
      const out = await fn()
      this.counts.tosses++
      return out
    } finally {
      this.tossing--
    }
  }
}

const meters = new WeakMap()

/** The bot's meter, installed at the first call (a rejoined bot is a new bot with a new meter). */
function meterOf (bot) {
  let meter = meters.get(bot)
  if (!meter) {
    meter = new ActionMeter(bot)
    meters.set(bot, meter)
  }
  return meter
}

module.exports = { CATEGORIES, meterOf, noActions }
