'use strict'
// Argument validation shared by reset specs and skill calls (whose argument types come from the op
// table, rules.js). Every failure is a BadRequest whose message names the field and what was expected;
// unknown item names get close-match suggestions.

const { badRequest, isMap } = require('./protocol')

/** Edit distance, for "did you mean" suggestions. */
function distance (a, b) {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const cur = [i]
    for (let j = 1; j <= b.length; j++) cur.push(Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1)))
    prev = cur
  }
  return prev[b.length]
}

function suggest (name, options) {
  const close = options.map(o => [distance(name, o), o]).filter(([d]) => d <= 2).sort((x, y) => x[0] - y[0]).slice(0, 3).map(([, o]) => o)
  return close.length ? `; did you mean ${close.map(c => JSON.stringify(c)).join(' or ')}?` : ''
}

const check = {
  map (value, field) {
    if (!isMap(value)) throw badRequest(`${field} must be a map, got ${JSON.stringify(value)}`)
    return value
  },
  string (value, field, { allowEmpty = false, max = 128 } = {}) {
    if (typeof value !== 'string' || (!allowEmpty && value === '')) {
      throw badRequest(`${field} must be a ${allowEmpty ? '' : 'non-empty '}string, got ${JSON.stringify(value)}`)
    }
    if (value.length > max) throw badRequest(`${field} is longer than ${max} characters`)
    return value
  },
  count (value, field, { min = 1, max = 64 * 36 } = {}) {
    if (!Number.isInteger(value) || value < min || value > max) {
      throw badRequest(`${field} must be an integer in [${min}, ${max}], got ${JSON.stringify(value)}`)
    }
    return value
  },
  pos (value, field) {
    if (!Array.isArray(value) || value.length !== 3 || !value.every(v => Number.isInteger(v) && Math.abs(v) <= 1000)) {
      throw badRequest(`${field} must be [x, y, z] integers within +-1000, got ${JSON.stringify(value)}`)
    }
    return value
  },
  item (registry, value, field) {
    check.string(value, field)
    if (!registry.itemsByName[value]) {
      throw badRequest(`${field}: unknown item ${JSON.stringify(value)} (names are minecraft-data 1.21.4 item names)` +
        suggest(value, Object.keys(registry.itemsByName)))
    }
    return value
  },
  /** {item: count} with known items and positive counts. */
  counts (registry, value, field) {
    check.map(value, field)
    const out = {}
    for (const [name, n] of Object.entries(value)) {
      check.item(registry, name, `${field} item`)
      out[name] = check.count(n, `${field}[${name}]`, { min: 0 })
    }
    for (const name of Object.keys(out)) if (out[name] === 0) delete out[name]
    return out
  },
  /** A skill-call argument of `type`, an argument type of the op table (rules.js, skill_ops.json). */
  arg (registry, type, value, field) {
    if (type.kind === 'item') return check.item(registry, value, field)
    if (type.kind === 'int') return check.count(value, field, { min: type.min, max: type.max })
    check.string(value, field, { allowEmpty: type.min === 0, max: type.max })
    if (value.length < type.min) throw badRequest(`${field} must have at least ${type.min} characters, got ${JSON.stringify(value)}`)
    return value
  },
  /** Reject keys outside `allowed` so a typo is not silently ignored. */
  keys (value, allowed, field) {
    const extra = Object.keys(value).filter(k => !allowed.includes(k))
    if (extra.length) throw badRequest(`${field} has unknown field(s) ${extra.join(', ')}; expected ${allowed.join(', ')}`)
  }
}

module.exports = { check }
