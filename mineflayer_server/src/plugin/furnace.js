'use strict'
// Furnaces: input, fuel and output slots that smelt on the server tick, by the smelting and fuel rules of
// recipes.json (options.recipes, see ../rules.js), the table the Python world smelts by. Cook time is
// configurable (`api.setCookTicks`) so episodes need not wait the vanilla 200 ticks per item; burn times
// scale with it, so one fuel item smelts the number of items recipes.json says at every cook time. Each
// furnace keeps its own cook time, so arenas of one server run episodes with different cook times at once.

const { COOK_TICKS } = require('../rules')

/**
 * What the furnaces of a plugin started with `recipes` smelt: input item -> output item, and fuel item ->
 * burn time in vanilla ticks (COOK_TICKS per item smelted).
 */
function smeltingTable (recipes) {
  return { smelting: { ...recipes.smelting }, fuelTicks: { ...recipes.fuelTicks } }
}

function server (serv, api, options) {
  const recipes = options.recipes
  if (!recipes || !recipes.smelting || !recipes.fuelTicks) {
    throw new Error('the furnace plugin needs options.recipes: the recipes.json table of the rules directory (rules.js)')
  }
  const registry = serv.registry
  let defaultCookTicks = Math.max(1, options.cookTicks ?? 200)
  const ticksOf = store => store.cookTicks ?? defaultCookTicks

  // Burn time and cooking progress are counted in units of 1/cookTicks vanilla tick: a server tick is
  // COOK_TICKS units, an item takes COOK_TICKS * cookTicks units and a fuel item burns fuelTicks * cookTicks,
  // exact integers for every cook time (the fuel values of recipes.json are whole vanilla ticks).
  const itemUnits = store => COOK_TICKS * ticksOf(store)

  api.smeltingResult = name => (Object.hasOwn(recipes.smelting, name) ? recipes.smelting[name] : null)
  api.fuelTicks = name => (Object.hasOwn(recipes.fuelTicks, name) ? recipes.fuelTicks[name] : 0)
  api.smeltingTable = () => smeltingTable(recipes)
  /**
   * Set the cook time of `stores` (default: every furnace, and the default of furnaces made later), keeping
   * each one's burn and cook progress in proportion.
   */
  api.setCookTicks = (ticks, stores = null) => {
    const next = Math.max(1, ticks)
    for (const store of stores ?? api.containers()) {
      if (store.kind !== 'furnace') continue
      const cur = ticksOf(store)
      for (const key of ['burnLeft', 'burnTotal', 'progress']) store[key] = Math.round(store[key] * next / cur)
      store.cookTicks = next
    }
    if (stores === null) defaultCookTicks = next
  }
  /** The cook time of `store`, or the default for furnaces without one of their own. */
  api.cookTicks = (store = null) => (store ? ticksOf(store) : defaultCookTicks)

  api.sendFurnaceProgress = store => {
    for (const viewer of store.viewers) {
      if (!viewer.gcWindow || viewer.gcWindow.store !== store) continue
      // the client shows these in server ticks (the protocol's values are 16-bit)
      const values = [Math.ceil(store.burnLeft / COOK_TICKS), Math.ceil(store.burnTotal / COOK_TICKS), Math.floor(store.progress / COOK_TICKS), ticksOf(store)]
      values.forEach((value, property) => viewer._client.write('craft_progress_bar', { windowId: viewer.gcWindow.id, property, value }))
    }
  }

  /** One server tick: burn and cook COOK_TICKS units, lighting the next fuel item as vanilla does. */
  function tick (store) {
    let budget = COOK_TICKS
    let changed = false
    while (budget > 0) {
      const [input, fuel, output] = store.slots
      const resultName = input && api.smeltingResult(input.name)
      const resultId = resultName && registry.itemsByName[resultName].id
      const canSmelt = !!resultId && (!output || (output.type === resultId && output.count < output.stackSize))
      if (store.burnLeft <= 0) {
        const ticks = fuel ? api.fuelTicks(fuel.name) : 0
        if (!canSmelt || ticks <= 0) {
          // the fire is out and stays out: an unfinished item loses its progress
          if (store.progress) { store.progress = 0; changed = true }
          break
        }
        store.burnLeft = store.burnTotal = ticks * ticksOf(store)
        fuel.count--
        store.slots[1] = fuel.count > 0 ? fuel : null
        api.broadcastSlot(store, 1)
      }
      changed = true
      if (!canSmelt) {
        // burning with nothing to smelt: the fuel burns away
        const step = Math.min(budget, store.burnLeft)
        store.burnLeft -= step
        budget -= step
        store.progress = 0
        continue
      }
      const step = Math.min(budget, store.burnLeft, itemUnits(store) - store.progress)
      store.burnLeft -= step
      budget -= step
      store.progress += step
      if (store.progress >= itemUnits(store)) {
        store.progress = 0
        input.count--
        store.slots[0] = input.count > 0 ? input : null
        if (output) output.count++
        else store.slots[2] = new api.Item(resultId, 1)
        api.broadcastSlot(store, 0)
        api.broadcastSlot(store, 2)
      }
    }
    if (changed && serv.tickCount % 5 === 0) api.sendFurnaceProgress(store)
  }

  serv.on('tick', () => {
    for (const store of api.containers()) if (store.kind === 'furnace') tick(store)
  })
}

module.exports = { server, smeltingTable }
