// Compiler::finish: unions expanded into their leaves, then everything that can never be
// completed pruned away, so that a writer following the compiled table never dead-ends.
#include <algorithm>

#include "server/json_schema_impl.h"

namespace gossamer::server::json_schema_impl {

// The types of leaf `n` that can be completed, given which nodes can (sat).
uint8_t Compiler::sat_types(const JsonSchemaNode& n, const std::vector<char>& sat) const {
  uint8_t t = n.types & (kTypeString | kTypeNumber | kTypeInteger | kTypeBoolean | kTypeNull);
  if (n.types & kTypeObject) {
    bool ok = n.min_props <= n.max_props;
    size_t nreq = 0, nsat = 0;
    for (size_t k = 0; k < n.names.size(); ++k) {
      const bool s = sat[n.values[k]] != 0;
      nsat += s;
      if (test_bit(n.required.data(), k)) {
        ok = ok && s;
        ++nreq;
      }
    }
    const bool extra = n.additional != kNoNode && sat[n.additional];
    if (ok && nreq <= n.max_props && (extra || n.min_props <= nsat)) t |= kTypeObject;
  }
  if (n.types & kTypeArray) {
    bool ok = n.min_items <= n.max_items;
    for (size_t k = 0; k < n.prefix.size() && k < n.min_items; ++k) ok = ok && sat[n.prefix[k]];
    if (n.min_items > n.prefix.size()) ok = ok && n.items != kNoNode && sat[n.items];
    if (ok) t |= kTypeArray;
  }
  return t;
}

// Expands unions into leaves, finds what can be completed (a least fixpoint: recursion without
// a base case never can) and prunes the rest, so that following the table never dead-ends.
Status Compiler::finish(uint32_t root) {
  const size_t count = out.nodes.size();
  for (size_t i = 0; i < count; ++i) {
    std::vector<uint32_t>& alts = out.nodes[i].alts;
    std::vector<char> seen(count, 0);
    std::vector<uint32_t> todo = {static_cast<uint32_t>(i)};
    while (!todo.empty()) {
      const uint32_t x = todo.back();
      todo.pop_back();
      if (seen[x]) continue;
      seen[x] = 1;
      if (leaf_[x]) alts.push_back(x);
      for (uint32_t m : members_[x]) todo.push_back(m);
    }
    std::sort(alts.begin(), alts.end());
  }
  std::vector<char> sat(count, 0);
  std::vector<uint8_t> types(count, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < count; ++i) {
      const JsonSchemaNode& n = out.nodes[i];
      bool s = false;
      if (!leaf_[i]) {
        for (uint32_t a : n.alts) s = s || sat[a];
      } else if (n.enum_index >= 0) {
        s = !out.enums[static_cast<size_t>(n.enum_index)].empty();
      } else {
        types[i] = sat_types(n, sat);
        s = types[i] != 0;
      }
      if (s && !sat[i]) changed = true;
      sat[i] = sat[i] || s;
    }
  }
  if (!sat[root]) return bad("no JSON value satisfies the schema", "");
  for (size_t i = 0; i < count; ++i) {
    JsonSchemaNode& n = out.nodes[i];
    std::erase_if(n.alts, [&](uint32_t a) { return !sat[a]; });
    if (!leaf_[i] || n.enum_index >= 0) continue;
    n.types = types[i];
    n.blocked.assign(n.words(), 0);
    for (size_t k = 0; k < n.names.size(); ++k) {
      if (!sat[n.values[k]]) set_bit(n.blocked.data(), k);
    }
    if (n.additional != kNoNode && !sat[n.additional]) n.additional = kNoNode;
    if (n.items != kNoNode && !sat[n.items]) n.items = kNoNode;
    for (size_t k = 0; k < n.prefix.size(); ++k) {
      if (!sat[n.prefix[k]]) {
        n.max_items = std::min<uint32_t>(n.max_items, static_cast<uint32_t>(k));
        break;
      }
    }
    if (n.items == kNoNode) {
      n.max_items = std::min<uint32_t>(n.max_items, static_cast<uint32_t>(n.prefix.size()));
    }
  }
  out.root = root;
  return Status::Ok();
}

}  // namespace gossamer::server::json_schema_impl
