'use strict'
// Server-side inventory helpers: add whole stacks, clear, count. Slots follow the player window layout
// (0 craft result, 1-4 craft grid, 5-8 armour, 9-35 main, 36-44 hotbar, 45 offhand).

const HOTBAR_THEN_MAIN = [
  ...Array.from({ length: 9 }, (_, i) => 36 + i),
  ...Array.from({ length: 27 }, (_, i) => 9 + i)
]

function server (serv, api) {
  const Item = require('prismarine-item')(serv.registry)
  api.Item = Item

  /** Put `item` into the player's inventory (merging stacks first, hotbar first); returns the count left over. */
  api.addToInventory = (player, item) => {
    let left = item.count
    for (const slot of HOTBAR_THEN_MAIN) {
      const cur = player.inventory.slots[slot]
      if (left && cur && cur.type === item.type && cur.count < cur.stackSize) {
        const n = Math.min(left, cur.stackSize - cur.count)
        cur.count += n
        left -= n
        player.inventory.updateSlot(slot, cur)
      }
    }
    for (const slot of HOTBAR_THEN_MAIN) {
      if (left && !player.inventory.slots[slot]) {
        const n = Math.min(left, item.stackSize || 64)
        player.inventory.updateSlot(slot, new Item(item.type, n, item.metadata, item.nbt))
        left -= n
      }
    }
    return left
  }

  api.clearInventory = player => {
    for (let slot = 0; slot < player.inventory.slots.length; slot++) {
      if (player.inventory.slots[slot]) player.inventory.updateSlot(slot, null)
    }
    player.gcCursor = null
  }

  /**
   * Every item the player owns: inventory slots 1-45, the cursor, and an open crafting table's grid.
   * Slot 0 (craft result) is a preview, not an owned item.
   */
  api.inventoryCounts = player => {
    const counts = {}
    const add = item => { if (item && item.count > 0) counts[item.name] = (counts[item.name] || 0) + item.count }
    player.inventory.slots.forEach((item, slot) => { if (slot > 0) add(item) })
    add(player.gcCursor)
    const win = player.gcWindow
    if (win && win.kind === 'crafting_table') win.store.slots.forEach((item, slot) => { if (slot > 0) add(item) })
    return counts
  }
}

module.exports = { server }
