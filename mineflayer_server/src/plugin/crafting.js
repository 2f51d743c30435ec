'use strict'
// Crafting results computed from minecraft-data recipes, so that a normal window-click craft
// (what mineflayer's bot.craft does) sees the result slot fill in as on a vanilla server.

/** Trim empty rows/columns so a shape matches wherever it sits in the grid. */
function trim (rows) {
  const cells = []
  rows.forEach((row, y) => row.forEach((id, x) => { if (id != null && id >= 0) cells.push({ x, y }) }))
  if (!cells.length) return []
  const xs = cells.map(c => c.x)
  const ys = cells.map(c => c.y)
  const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)]
  const out = []
  for (let y = y0; y <= y1; y++) {
    const row = []
    for (let x = x0; x <= x1; x++) {
      const id = rows[y]?.[x]
      row.push(id != null && id >= 0 ? id : null)
    }
    out.push(row)
  }
  return out
}

const shapeKey = rows => rows.map(r => r.map(v => (v == null ? '_' : v)).join(',')).join('|')
const idOf = v => (v && typeof v === 'object' ? v.id : v)

/** Index every shaped recipe (and its mirror image) and every shapeless recipe of the registry. */
function indexRecipes (registry) {
  const shaped = new Map()
  const shapeless = new Map()
  for (const list of Object.values(registry.recipes)) {
    for (const recipe of list) {
      if (recipe.inShape) {
        const rows = trim(recipe.inShape.map(row => row.map(idOf)))
        for (const variant of [rows, rows.map(r => [...r].reverse())]) {
          const key = shapeKey(variant)
          if (!shaped.has(key)) shaped.set(key, recipe.result)
        }
      } else if (recipe.ingredients) {
        const key = recipe.ingredients.map(idOf).sort((a, b) => a - b).join(',')
        if (!shapeless.has(key)) shapeless.set(key, recipe.result)
      }
    }
  }
  return { shaped, shapeless }
}

function server (serv, api) {
  const { shaped, shapeless } = indexRecipes(serv.registry)

  /** `grid`: width*width items (or null). Returns the recipe result `{id, count}` or null. */
  api.matchRecipe = (grid, width) => {
    const rows = []
    for (let y = 0; y < width; y++) rows.push(grid.slice(y * width, (y + 1) * width).map(it => (it ? it.type : null)))
    const trimmed = trim(rows)
    if (!trimmed.length) return null
    const ids = grid.filter(Boolean).map(it => it.type).sort((a, b) => a - b).join(',')
    return shaped.get(shapeKey(trimmed)) || shapeless.get(ids) || null
  }

  /** Recompute and send the result slot of the player's crafting grid (2x2 inventory or open table). */
  api.recomputeCraft = player => {
    const Item = api.Item
    const win = player.gcWindow
    if (win && win.kind === 'crafting_table') {
      const result = api.matchRecipe(win.store.slots.slice(1, 10), 3)
      win.store.slots[0] = result ? new Item(result.id, result.count) : null
      api.sendSlot(player, win.id, 0, win.store.slots[0])
    } else {
      const result = api.matchRecipe(player.inventory.slots.slice(1, 5), 2)
      const item = result ? new Item(result.id, result.count) : null
      if (item) item.slot = 0
      player.inventory.slots[0] = item
      api.sendSlot(player, 0, 0, item)
    }
  }
}

module.exports = { server, indexRecipes, trim }
