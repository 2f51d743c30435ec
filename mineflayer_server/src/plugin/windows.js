'use strict'
// Window handling: opening chests / crafting tables / furnaces, and window clicks.
//
// Since 1.17 a client sends, with every window_click, the slots it predicts will change and the item
// it predicts on the cursor. flying-squid's own click handling does not understand 1.21 windows, so
// the server mirrors the client's prediction ("trust the client") and adds what only the server can
// know: crafting results, consumed ingredients and thrown items.

function server (serv, api) {
  const Item = () => api.Item

  api.sendSlot = (player, windowId, slot, item) => {
    player._client.write('set_slot', { windowId, stateId: 0, slot, item: Item().toNotch(item || null) })
  }

  function windowSlots (player) {
    return [...player.gcWindow.store.slots, ...player.inventory.slots.slice(9, 45)]
  }

  api.openWindow = (player, kind, pos) => {
    if (player.gcWindow) api.closeWindow(player)
    player.gcWindowCounter = ((player.gcWindowCounter || 0) % 100) + 1
    // A crafting table keeps nothing: its grid belongs to the player while the window is open.
    const store = kind === 'crafting_table'
      ? { kind, slots: new Array(api.containerSize(kind)).fill(null), viewers: new Set() }
      : api.container(kind, pos)
    player.gcWindow = { id: player.gcWindowCounter, kind, pos, size: api.containerSize(kind), store }
    store.viewers.add(player)
    const title = serv._createChatComponent({ translate: kind === 'crafting_table' ? 'container.crafting' : 'container.' + kind })
    player._client.write('open_window', {
      windowId: player.gcWindow.id,
      inventoryType: api.windowType(kind),
      windowTitle: title.toNetworkFormat()
    })
    player._client.write('window_items', {
      windowId: player.gcWindow.id,
      stateId: 0,
      items: windowSlots(player).map(it => Item().toNotch(it || null)),
      carriedItem: Item().toNotch(player.gcCursor || null)
    })
    if (kind === 'furnace') api.sendFurnaceProgress(store)
    return true
  }

  /** Close the player's window as vanilla does: grid items and the cursor go back to the inventory. */
  api.closeWindow = player => {
    const win = player.gcWindow
    player.gcWindow = null
    player.windowType = ''
    if (win) {
      win.store.viewers.delete(player)
      if (win.kind === 'crafting_table') {
        for (let i = 1; i < 10; i++) if (win.store.slots[i]) api.addToInventory(player, win.store.slots[i])
      }
    }
    for (let i = 1; i <= 4; i++) {
      const item = player.inventory.slots[i]
      if (item) {
        player.inventory.updateSlot(i, null)
        api.addToInventory(player, item)
      }
    }
    player.inventory.slots[0] = null
    if (player.gcCursor) {
      api.addToInventory(player, player.gcCursor)
      player.gcCursor = null
    }
  }

  serv.once('asap', () => {
    // Replaces flying-squid's chest handler, which opens an empty GUI in a pre-1.21 item format.
    for (const kind of ['chest', 'crafting_table', 'furnace']) {
      serv.onBlockInteraction(kind, async ({ block, player }) => {
        if (player.crouching) return false
        return api.openWindow(player, kind, block.position)
      })
    }
  })
}

function player (player, serv, api) {
  player.gcCursor = null
  player.gcWindow = null

  player.on('spawned', () => {
    player._client.removeAllListeners('window_click')
    player._client.removeAllListeners('close_window')
    player._client.on('window_click', packet => {
      try { onClick(packet) } catch (err) { api.log('plugin', `window_click from ${player.username} failed: ${err.stack}`) }
    })
    player._client.on('close_window', () => api.closeWindow(player))
  })

  function onClick (packet) {
    const Item = api.Item
    const win = packet.windowId === 0 ? null : player.gcWindow
    if (packet.windowId !== 0 && (!win || win.id !== packet.windowId)) return // stale click for a closed window
    const size = win ? win.size : 0
    const inContainer = slot => win && slot < size
    const toInventorySlot = slot => (win ? 9 + slot - size : slot)
    const get = slot => (inContainer(slot) ? win.store.slots[slot] : player.inventory.slots[toInventorySlot(slot)])
    const set = (slot, item) => {
      if (item) item.slot = inContainer(slot) ? slot : toInventorySlot(slot)
      if (inContainer(slot)) win.store.slots[slot] = item
      else player.inventory.slots[toInventorySlot(slot)] = item // silent: the client already shows it
    }
    const craftGrid = win ? (win.kind === 'crafting_table' ? 9 : 0) : 4
    const previousCursor = player.gcCursor
    const previousResult = craftGrid ? get(0) : null
    const before = packet.slot >= 0 ? get(packet.slot) : null
    const beforeCount = before ? before.count : 0
    let gridChanged = false

    for (const { location, item } of packet.changedSlots || []) {
      set(location, Item.fromNotch(item))
      if (craftGrid && location >= 1 && location <= craftGrid) gridChanged = true
      if (inContainer(location)) api.broadcastSlot(win.store, location, player)
    }
    player.gcCursor = Item.fromNotch(packet.cursorItem)

    // Throwing: a click outside the window drops the cursor; mode 4 (Q) drops from a slot.
    if (packet.slot === -999 && packet.mode === 0 && previousCursor) {
      const n = previousCursor.count - (player.gcCursor ? player.gcCursor.count : 0)
      if (n > 0) api.dropItem(player, new Item(previousCursor.type, n, previousCursor.metadata, previousCursor.nbt))
    } else if (packet.mode === 4 && before) {
      const now = get(packet.slot)
      const n = beforeCount - (now ? now.count : 0)
      if (n > 0) api.dropItem(player, new Item(before.type, n, before.metadata, before.nbt))
    }

    // Taking the craft result consumes one of each ingredient.
    if (craftGrid && packet.slot === 0 && previousResult && !get(0)) {
      for (let i = 1; i <= craftGrid; i++) {
        const item = get(i)
        if (!item) continue
        item.count--
        set(i, item.count > 0 ? item : null)
        api.sendSlot(player, win ? win.id : 0, i, get(i))
      }
      gridChanged = true
    }
    if (craftGrid && (gridChanged || (packet.slot >= 1 && packet.slot <= craftGrid))) api.recomputeCraft(player)
  }
}

module.exports = { server, player }
