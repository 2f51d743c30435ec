'use strict'
// Furnaces: input, fuel and output slots that smelt on the server tick. Cook time is configurable
// (`api.setCookTicks`) so episodes need not wait the vanilla 200 ticks per item.

const table = require('./smelting.json')

function fuelTicks (name) {
  if (table.fuel[name]) return table.fuel[name]
  for (const [suffix, ticks] of Object.entries(table.fuel_suffixes)) if (name.endsWith(suffix)) return ticks
  return 0
}

function server (serv, api, options) {
  const registry = serv.registry
  let cookTicks = Math.max(1, options.cookTicks ?? 200)

  api.smeltingResult = name => table.recipes[name] || null
  api.fuelTicks = fuelTicks
  api.setCookTicks = ticks => { cookTicks = Math.max(1, ticks) }
  api.cookTicks = () => cookTicks

  api.sendFurnaceProgress = store => {
    for (const viewer of store.viewers) {
      if (!viewer.gcWindow || viewer.gcWindow.store !== store) continue
      const values = [store.burnLeft, store.burnTotal, store.progress, cookTicks]
      values.forEach((value, property) => viewer._client.write('craft_progress_bar', { windowId: viewer.gcWindow.id, property, value }))
    }
  }

  function tick (store) {
    const [input, fuel, output] = store.slots
    const resultName = input && api.smeltingResult(input.name)
    const resultId = resultName && registry.itemsByName[resultName].id
    const canSmelt = !!resultId && (!output || (output.type === resultId && output.count < output.stackSize))
    let changed = false
    if (store.burnLeft <= 0 && canSmelt && fuel && fuelTicks(fuel.name) > 0) {
      store.burnLeft = store.burnTotal = fuelTicks(fuel.name)
      fuel.count--
      store.slots[1] = fuel.count > 0 ? fuel : null
      api.broadcastSlot(store, 1)
      changed = true
    }
    if (store.burnLeft > 0) {
      store.burnLeft--
      changed = true
      if (canSmelt) {
        store.progress++
        if (store.progress >= cookTicks) {
          store.progress = 0
          input.count--
          store.slots[0] = input.count > 0 ? input : null
          if (output) output.count++
          else store.slots[2] = new api.Item(resultId, 1)
          api.broadcastSlot(store, 0)
          api.broadcastSlot(store, 2)
        }
      } else store.progress = 0
    } else if (store.progress) {
      store.progress = 0
      changed = true
    }
    if (changed && serv.tickCount % 5 === 0) api.sendFurnaceProgress(store)
  }

  serv.on('tick', () => {
    for (const store of api.containers()) if (store.kind === 'furnace') tick(store)
  })
}

module.exports = { server, fuelTicks }
