'use strict'
// Reset specs (the WorldSpec of the Python side) checked and normalized. Positions stay relative to
// the arena floor here; the world adds the floor height. Sizes are checked first, against limits.json's
// `spec` section, so a spec too large to arrange is refused (TooLarge) before anything else is done.

const { badRequest, isMap, tooLarge, wireLimits } = require('./protocol')
const { check } = require('./validate')

const STATION_KINDS = Object.freeze(['chest', 'crafting_table', 'furnace', 'site'])
/** The most bots an arena holds: a team of the Python side has up to five agents. */
const MAX_AGENTS = 5
const SPEC_FIELDS = ['agents', 'stations', 'positions', 'inventories', 'containers', 'cook_ticks']

/**
 * TooLarge when the spec holds more than `limits.spec` allows: stations, site cells (all sites together) or
 * distinct items of one inventory or container. Reads only lengths, so it costs nothing however large the spec.
 */
function checkSizes (raw, max) {
  const over = []
  const stations = Array.isArray(raw.stations) ? raw.stations : []
  if (stations.length > max.stations) over.push(`${stations.length} stations (limits.spec.stations: at most ${max.stations})`)
  let cells = 0
  for (const s of stations) if (isMap(s) && Array.isArray(s.cells)) cells += s.cells.length
  if (cells > max.site_cells) over.push(`${cells} site cells (limits.spec.site_cells: at most ${max.site_cells})`)
  for (const field of ['inventories', 'containers']) {
    let kinds = 0
    for (const m of isMap(raw[field]) ? Object.values(raw[field]) : []) if (isMap(m)) kinds = Math.max(kinds, Object.keys(m).length)
    if (kinds > max.item_kinds) over.push(`${kinds} distinct items in one of its ${field} (limits.spec.item_kinds: at most ${max.item_kinds})`)
  }
  if (over.length) throw tooLarge(`reset spec holds ${over.join(', ')}; nothing was done: send a smaller layout`)
}

/**
 * Check a reset spec against `limits` (rules.limits: limits.json as rules.js read it); returns
 * `{agents, stations, positions, inventories, containers, cookTicks}`.
 */
function parseSpec (registry, raw, limits) {
  check.map(raw, 'reset spec')
  check.keys(raw, SPEC_FIELDS, 'reset spec')
  checkSizes(raw, wireLimits(limits).spec)
  if (!Array.isArray(raw.agents) || raw.agents.length < 1 || raw.agents.length > MAX_AGENTS) {
    throw badRequest(`agents must be a list of 1-${MAX_AGENTS} names`)
  }
  const agents = raw.agents.map((a, i) => {
    check.string(a, `agents[${i}]`)
    if (!/^[A-Za-z0-9_]{1,16}$/.test(a)) throw badRequest(`agents[${i}] ${JSON.stringify(a)} is not a valid Minecraft username (1-16 of A-Z a-z 0-9 _)`)
    return a
  })
  if (new Set(agents).size !== agents.length) throw badRequest('agents must be distinct')

  if (!Array.isArray(raw.stations)) throw badRequest('stations must be a list')
  const stations = raw.stations.map((s, i) => {
    const field = `stations[${i}]`
    check.map(s, field)
    check.keys(s, ['name', 'kind', 'pos', 'cells'], field)
    const kind = check.string(s.kind, `${field}.kind`)
    if (!STATION_KINDS.includes(kind)) throw badRequest(`${field}.kind ${JSON.stringify(kind)} is not one of ${STATION_KINDS.join(', ')}`)
    const cells = s.cells === undefined || s.cells === null ? [] : s.cells
    if (!Array.isArray(cells)) throw badRequest(`${field}.cells must be a list of [x, y, z]`)
    return {
      name: check.string(s.name, `${field}.name`),
      kind,
      pos: check.pos(s.pos, `${field}.pos`),
      cells: cells.map((c, j) => check.pos(c, `${field}.cells[${j}]`))
    }
  })
  if (new Set(stations.map(s => s.name)).size !== stations.length) throw badRequest('station names must be distinct')
  const occupied = new Map()
  for (const s of stations) {
    if (s.kind === 'site') continue
    const key = s.pos.join(',')
    if (occupied.has(key)) throw badRequest(`stations ${occupied.get(key)} and ${s.name} share position ${key}`)
    occupied.set(key, s.name)
  }

  check.map(raw.positions, 'positions')
  const positions = {}
  for (const a of agents) positions[a] = check.pos(raw.positions[a], `positions[${a}]`)

  const inventories = {}
  const rawInv = raw.inventories === undefined ? {} : check.map(raw.inventories, 'inventories')
  for (const name of Object.keys(rawInv)) if (!agents.includes(name)) throw badRequest(`inventories names unknown agent ${JSON.stringify(name)}`)
  for (const a of agents) inventories[a] = rawInv[a] === undefined ? {} : check.counts(registry, rawInv[a], `inventories[${a}]`)

  const containers = {}
  const rawCont = raw.containers === undefined ? {} : check.map(raw.containers, 'containers')
  for (const [name, counts] of Object.entries(rawCont)) {
    const station = stations.find(s => s.name === name)
    if (!station || station.kind !== 'chest') throw badRequest(`containers[${name}]: ${JSON.stringify(name)} is not a chest station`)
    containers[name] = check.counts(registry, counts, `containers[${name}]`)
  }

  const cookTicks = raw.cook_ticks === undefined ? 0 : check.count(raw.cook_ticks, 'cook_ticks', { min: 0, max: 24000 })
  return { agents, stations, positions, inventories, containers, cookTicks }
}

module.exports = { MAX_AGENTS, parseSpec, STATION_KINDS }
