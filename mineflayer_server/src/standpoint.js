'use strict'
// Where to stand to build: a standpoint from which the bot reaches, and sees, as many of the next site
// cells as possible, so that one walk serves several placements instead of one pathfinding walk per
// block. Pure geometry over a `solidAt` view of the world, so it is testable without a server.
//
// A cell is placed by clicking the top face of the block below it (as the place skill does), so the
// bot must see the centre of that face: the segment from its eye to that point may cross no solid
// block, counting the cells it will have placed before (fill order is kept, so a near row can hide the
// row behind it; the plan then prefers a standpoint on the far side).

const { Vec3 } = require('vec3')

const EYE_HEIGHT = 1.62
/** Vanilla's survival block interaction range, eye to the clicked point (the server allows 1 more). */
const PLACE_REACH = 4.5
/** How far around the cells standpoints are searched. */
const SEARCH_MARGIN = 4

const key = (x, y, z) => `${x},${y},${z}`

/** Keys of the blocks a player's body (0.6 x 1.8 x 0.6) at `pos` overlaps: no block can go there. */
function bodyBlocks (pos) {
  const keys = new Set()
  for (let x = Math.floor(pos.x - 0.3); x <= Math.floor(pos.x + 0.3 - 1e-9); x++) {
    for (let y = Math.floor(pos.y); y <= Math.floor(pos.y + 1.8 - 1e-9); y++) {
      for (let z = Math.floor(pos.z - 0.3); z <= Math.floor(pos.z + 0.3 - 1e-9); z++) keys.add(key(x, y, z))
    }
  }
  return keys
}

/** The point the bot looks at and clicks to place `cell`: the centre of the top face of the block below. */
const clickPoint = cell => new Vec3(cell.x + 0.5, cell.y, cell.z + 0.5)

/**
 * True when `eye` reaches `cell`'s click point within `reach` and the segment to it crosses no solid
 * block (`solid(x, y, z)`) before the clicked face.
 */
function canPlaceFrom (eye, cell, solid, reach = PLACE_REACH) {
  const to = clickPoint(cell)
  const d = to.minus(eye)
  const length = d.norm()
  if (length > reach) return false
  // Sample the segment finely; stop just short of the face, whose block is the solid one clicked.
  const steps = Math.ceil(length / 0.05)
  let px = NaN; let py = NaN; let pz = NaN // the block sampled last: about 20 samples fall in each
  for (let i = 0; i < steps; i++) {
    const t = i / steps
    const x = Math.floor(eye.x + d.x * t)
    const y = Math.floor(eye.y + d.y * t)
    const z = Math.floor(eye.z + d.z * t)
    if (x === px && y === py && z === pz) continue
    if (solid(x, y, z)) return false
    px = x; py = y; pz = z
  }
  return true
}

/**
 * How many of `cells`, in order, a player standing at `feet` can place, each seeing past the ones
 * placed before it and none inside the player's own body.
 */
function reachableRun (feet, cells, solid, { reach = PLACE_REACH, eyeHeight = EYE_HEIGHT } = {}) {
  const eye = feet.offset(0, eyeHeight, 0)
  const body = bodyBlocks(feet)
  const placed = new Set()
  const view = (x, y, z) => placed.has(key(x, y, z)) || solid(x, y, z)
  let n = 0
  for (const cell of cells) {
    if (body.has(key(cell.x, cell.y, cell.z)) || !canPlaceFrom(eye, cell, view, reach)) break
    placed.add(key(cell.x, cell.y, cell.z))
    n++
  }
  return n
}

/**
 * The best place to stand for placing `cells` (in fill order): the one covering the longest run of
 * them, the nearest to `from` among equals. The bot's own position counts as a candidate at distance 0,
 * so it never walks when walking would not reach more cells.
 *
 * @param o.cells Vec3 cells still to place, in fill order
 * @param o.from the bot's current (unfloored) position
 * @param o.solid (x, y, z) -> true for a block that stops a ray or a body
 * @param o.avoid Vec3 feet blocks no standpoint may use (every cell column of the site, other bots)
 * @returns {{stand: Vec3|null, covers: number}} `stand` null means stay where the bot is
 */
function planStandpoint ({ cells, from, solid, avoid = [], reach = PLACE_REACH, eyeHeight = EYE_HEIGHT }) {
  const opts = { reach, eyeHeight }
  const here = reachableRun(from, cells, solid, opts)
  if (here === cells.length) return { stand: null, covers: here }
  let best = { stand: null, covers: here, distance: 0 }
  const banned = new Set(avoid.map(p => key(p.x, p.y, p.z)))
  const ys = [...new Set(cells.map(c => c.y))]
  const box = axis => [Math.min(...cells.map(c => c[axis])) - SEARCH_MARGIN, Math.max(...cells.map(c => c[axis])) + SEARCH_MARGIN]
  const [x0, x1] = box('x')
  const [z0, z1] = box('z')
  const yLow = Math.min(...ys) - 1
  const yHigh = Math.max(...ys) + 1
  for (let y = yLow; y <= yHigh; y++) {
    for (let x = x0; x <= x1; x++) {
      for (let z = z0; z <= z1; z++) {
        if (banned.has(key(x, y, z)) || banned.has(key(x, y + 1, z))) continue
        // a standpoint has ground under the feet and room for the body
        if (!solid(x, y - 1, z) || solid(x, y, z) || solid(x, y + 1, z)) continue
        const stand = new Vec3(x, y, z)
        const covers = reachableRun(stand.offset(0.5, 0, 0.5), cells, solid, opts)
        if (covers === 0 || covers < best.covers) continue
        const distance = stand.offset(0.5, 0, 0.5).distanceTo(from)
        if (covers > best.covers || distance < best.distance) best = { stand, covers, distance }
      }
    }
  }
  return { stand: best.stand, covers: best.covers }
}

module.exports = { planStandpoint, reachableRun, canPlaceFrom, clickPoint, bodyBlocks, PLACE_REACH, EYE_HEIGHT }
