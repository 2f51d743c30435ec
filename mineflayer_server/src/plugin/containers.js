'use strict'
// Block containers with contents kept on the server: chests and furnaces, keyed by block position.
// Stock flying-squid opens an always-empty chest GUI; here the contents persist and every viewer
// sees the same slots.

const WINDOW_TYPES = {
  chest: 'minecraft:generic_9x3',
  crafting_table: 'minecraft:crafting',
  furnace: 'minecraft:furnace'
}

const posKey = p => `${p.x},${p.y},${p.z}`

function server (serv, api) {
  const { windows } = require('prismarine-windows')(serv.registry)
  const stores = new Map()

  /** Number of container slots (before the player inventory part) of a window kind. */
  api.containerSize = kind => windows[WINDOW_TYPES[kind]].inventory.start
  api.windowType = kind => windows[WINDOW_TYPES[kind]].type

  /** The persistent store of the chest or furnace at `pos`, created empty on first use. */
  api.container = (kind, pos) => {
    const key = posKey(pos)
    let store = stores.get(key)
    if (!store || store.kind !== kind) {
      store = {
        kind,
        pos: pos.clone(),
        slots: new Array(api.containerSize(kind)).fill(null),
        viewers: new Set(),
        burnLeft: 0,
        burnTotal: 0,
        progress: 0
      }
      stores.set(key, store)
    }
    return store
  }

  api.findContainer = pos => stores.get(posKey(pos)) || null
  api.containers = () => stores.values()

  /** Forget the store at `pos` (its block was removed). Viewers keep nothing. */
  api.dropContainer = pos => { stores.delete(posKey(pos)) }

  /** Send one container slot to every viewer except `except`. */
  api.broadcastSlot = (store, slot, except) => {
    for (const viewer of store.viewers) {
      if (viewer !== except && viewer.gcWindow && viewer.gcWindow.store === store) {
        api.sendSlot(viewer, viewer.gcWindow.id, slot, store.slots[slot])
      }
    }
  }
}

module.exports = { server, WINDOW_TYPES, posKey }
