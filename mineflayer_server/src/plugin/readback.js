'use strict'
// Ground-truth read-back: what the server holds, independent of any client's view.

const counts = items => {
  const out = {}
  for (const item of items) if (item && item.count > 0) out[item.name] = (out[item.name] || 0) + item.count
  return out
}

function server (serv, api) {
  api.playerByName = name => serv.players.find(p => p.username === name) || null

  /** Chest contents as {item: count}; an unknown position holds nothing. */
  api.containerCounts = pos => {
    const store = api.findContainer(pos)
    return store ? counts(store.slots) : {}
  }

  /** Furnace slots as {input, fuel, output}, each {item: count}. */
  api.furnaceCounts = pos => {
    const store = api.findContainer(pos)
    const slot = i => counts(store && store.kind === 'furnace' ? [store.slots[i]] : [])
    return { input: slot(0), fuel: slot(1), output: slot(2) }
  }

  /** Block name at an absolute position. */
  api.blockName = async pos => (await serv.overworld.getBlock(pos)).name

  /** Names of the blocks at `positions`, in order. */
  api.blockNames = positions => Promise.all(positions.map(api.blockName))
}

module.exports = { server, counts }
