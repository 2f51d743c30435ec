'use strict'
// World edits done by the server itself (never by a skill): every one is logged as one line.
// Also tracks every non-air block set since the last reset, by anyone, so reset can clear it.

const { posKey } = require('./containers')

function server (serv, api) {
  const registry = serv.registry
  const touched = new Map() // posKey -> Vec3 of blocks set to something other than air

  // Wrapped once every built-in plugin has defined serv.setBlock (the world plugin loads after ours).
  serv.once('asap', () => {
    const setBlock = serv.setBlock
    serv.setBlock = async (world, position, stateId) => {
      if (world === serv.overworld) {
        if (stateId) touched.set(posKey(position), position.clone())
        else touched.delete(posKey(position))
        // Replacing a chest or furnace (e.g. by /setblock) discards its contents, as on vanilla.
        const store = api.findContainer(position)
        if (store && registry.blocksByStateId[stateId]?.name !== store.kind) api.dropContainer(position)
      }
      return setBlock(world, position, stateId)
    }
  })

  /** Positions where a block was placed since the server started or was last cleared. */
  api.touchedPositions = () => [...touched.values()]

  /** Set a block by name (e.g. 'chest', 'air'). */
  api.setBlock = async (pos, name) => {
    const block = registry.blocksByName[name]
    if (!block) throw new Error(`unknown block '${name}'`)
    api.log('edit', `setblock ${pos.x} ${pos.y} ${pos.z} ${name}`)
    if (name !== 'chest' && name !== 'furnace') api.dropContainer(pos)
    await serv.setBlock(serv.overworld, pos, block.defaultState ?? block.minStateId)
  }

  /** Replace a player's whole inventory with `counts` ({item: count}). */
  api.setInventory = (player, counts) => {
    if (player.gcWindow) api.closeWindow(player)
    api.clearInventory(player)
    for (const [name, count] of Object.entries(counts)) {
      const left = api.addToInventory(player, new api.Item(registry.itemsByName[name].id, count))
      if (left) throw new Error(`${count} ${name} do not fit into ${player.username}'s inventory`)
    }
    api.log('edit', `inventory ${player.username} ${JSON.stringify(counts)}`)
  }

  /** Replace the contents of the chest or furnace store at `pos`; chest items fill slots in order. */
  api.setContainer = (kind, pos, counts) => {
    const store = api.container(kind, pos)
    store.slots.fill(null)
    store.burnLeft = store.burnTotal = store.progress = 0
    let slot = 0
    for (const [name, total] of Object.entries(counts)) {
      const data = registry.itemsByName[name]
      for (let left = total; left > 0;) {
        if (slot >= store.slots.length) throw new Error(`contents ${JSON.stringify(counts)} do not fit into the ${kind} at ${posKey(pos)}`)
        const n = Math.min(left, data.stackSize)
        store.slots[slot] = new api.Item(data.id, n)
        store.slots[slot].slot = slot
        slot++
        left -= n
      }
    }
    for (let i = 0; i < store.slots.length; i++) api.broadcastSlot(store, i)
    api.log('edit', `${kind} ${posKey(pos)} ${JSON.stringify(counts)}`)
  }

  /** Move a player (block centre, feet at pos.y). */
  api.teleport = async (player, pos) => {
    api.log('edit', `teleport ${player.username} ${pos.x} ${pos.y} ${pos.z}`)
    await player.teleport(pos.offset(0.5, 0, 0.5))
  }
}

module.exports = { server }
