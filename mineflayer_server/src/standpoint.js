'use strict'
// Where to stand to build: a standpoint from which the bot reaches, and sees, as many of the next site
// cells as possible, so that one walk serves several placements instead of one pathfinding walk per
// block. Pure geometry over a `solidAt` view of the world, so it is testable without a server.
//
// A cell is placed by clicking the top face of the block below it (as the place skill does), so the
// bot must see the centre of that face: the segment from its eye to that point may cross no solid
// block, counting the cells it will have placed before. A place fills the next cells of the site in fill
// order, so the site is left as the sim world leaves it, but clicks them farthest first: a block it has
// placed then never stands between its eye and a later click point, and a site is built from the side
// the bot comes from instead of a walk round to its far side.

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
 * `cells` in the order a player with its eye at `eye` clicks them: farthest click point first (ties in
 * the given order), so a block it has placed is never between its eye and a later click point.
 */
function farthestFirst (eye, cells) {
  return cells.map((cell, i) => ({ cell, i, d: clickPoint(cell).distanceTo(eye) }))
    .sort((a, b) => b.d - a.d || a.i - b.i)
    .map(e => e.cell)
}

/** True when an eye at `eye` places every one of `cells`, farthest first, each seen past those placed before it. */
function placesAll (eye, cells, solid, reach) {
  const placed = new Set()
  const view = (x, y, z) => placed.has(key(x, y, z)) || solid(x, y, z)
  for (const cell of farthestFirst(eye, cells)) {
    if (!canPlaceFrom(eye, cell, view, reach)) return false
    placed.add(key(cell.x, cell.y, cell.z))
  }
  return true
}

/**
 * How many of `cells` (in fill order) a player standing at `feet` can place: the longest first run of
 * them that it reaches, sees (clicking farthest first, past the cells placed before) and can fill without
 * a block going where its body is. Runs shorter than `atLeast` count as 0 (the planner asks only for
 * runs that would beat its best so far).
 */
function reachableRun (feet, cells, solid, { reach = PLACE_REACH, eyeHeight = EYE_HEIGHT } = {}, atLeast = 1) {
  const eye = feet.offset(0, eyeHeight, 0)
  const body = bodyBlocks(feet)
  let most = 0 // no run goes past the first cell out of reach or in the body
  while (most < cells.length) {
    const c = cells[most]
    if (body.has(key(c.x, c.y, c.z)) || clickPoint(c).distanceTo(eye) > reach) break
    most++
  }
  // occlusion need not shrink with the run (a farther cell clicked first can hide a nearer one), so each length is tried
  for (let n = most; n >= Math.max(1, atLeast); n--) if (placesAll(eye, cells.slice(0, n), solid, reach)) return n
  return 0
}

/**
 * The best place to stand for placing `cells` (in fill order): the one covering the longest run of
 * them, the nearest to `from` among equals. The bot's own position counts as a candidate at distance 0,
 * so it never walks when walking would not reach more cells.
 *
 * @param o.cells Vec3 cells still to place, in fill order
 * @param o.from the bot's current (unfloored) position
 * @param o.solid (x, y, z) -> true for a block that stops a ray or a body
 * @param o.avoid Vec3 blocks whose columns no standpoint may use (the site's cells, so nobody stands in the
 *   site or on what it built; other bots' feet)
 * @returns {{stand: Vec3|null, covers: number}} `stand` null means stay where the bot is
 */
function planStandpoint ({ cells, from, solid, avoid = [], reach = PLACE_REACH, eyeHeight = EYE_HEIGHT }) {
  const opts = { reach, eyeHeight }
  const here = reachableRun(from, cells, solid, opts)
  if (here === cells.length) return { stand: null, covers: here }
  let best = { stand: null, covers: here, distance: 0 }
  const banned = new Set(avoid.map(p => `${p.x},${p.z}`))
  const ys = [...new Set(cells.map(c => c.y))]
  const box = axis => [Math.min(...cells.map(c => c[axis])) - SEARCH_MARGIN, Math.max(...cells.map(c => c[axis])) + SEARCH_MARGIN]
  const [x0, x1] = box('x')
  const [z0, z1] = box('z')
  const yLow = Math.min(...ys) - 1
  const yHigh = Math.max(...ys) + 1
  for (let y = yLow; y <= yHigh; y++) {
    for (let x = x0; x <= x1; x++) {
      for (let z = z0; z <= z1; z++) {
        if (banned.has(`${x},${z}`)) continue
        // a standpoint has ground under the feet and room for the body
        if (!solid(x, y - 1, z) || solid(x, y, z) || solid(x, y + 1, z)) continue
        const stand = new Vec3(x, y, z)
        const covers = reachableRun(stand.offset(0.5, 0, 0.5), cells, solid, opts, best.covers)
        if (covers === 0) continue
        const distance = stand.offset(0.5, 0, 0.5).distanceTo(from)
        if (covers > best.covers || distance < best.distance) best = { stand, covers, distance }
      }
    }
  }
  return { stand: best.stand, covers: best.covers }
}

module.exports = { planStandpoint, reachableRun, farthestFirst, canPlaceFrom, clickPoint, bodyBlocks, PLACE_REACH, EYE_HEIGHT }
