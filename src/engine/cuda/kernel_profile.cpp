// Kernel profile: name shortening, aggregation of CUPTI kernel records and the table / JSON
// output. Pure C++ (no CUDA): unit-tested on the CPU with fake records
// (kernel_profile_test.cpp). The CUPTI side is kernel_profile_cupti.cpp.
#include "engine/cuda/kernel_profile.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <unordered_map>

namespace gossamer {

Status KernelProfileInput::validate() const {
  if (units <= 0) return InvalidArgument("kernel profile: units must be > 0");
  if (unit.empty()) return InvalidArgument("kernel profile: unit name is empty");
  if (!(wall_us_per_unit >= 0) || !(traced_wall_us_per_unit >= 0)) {
    return InvalidArgument("kernel profile: wall times must be >= 0");
  }
  return Status::Ok();
}

std::string demangle_kernel_name(const std::string& mangled) {
  if (mangled.rfind("_Z", 0) != 0) return mangled;
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) {
    std::free(d);
    return mangled;
  }
  std::string out(d);
  std::free(d);
  return out;
}

namespace {

bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Removes every "ident::" qualifier (and "(anonymous namespace)::").
std::string strip_qualifiers(std::string s) {
  const std::string anon = "(anonymous namespace)::";
  for (size_t p; (p = s.find(anon)) != std::string::npos;) s.erase(p, anon.size());
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (ident_char(s[i])) {
      size_t j = i;
      while (j < s.size() && ident_char(s[j])) ++j;
      if (s.compare(j, 2, "::") == 0) {
        i = j + 2;  // drop "ident::"
        continue;
      }
      out.append(s, i, j - i);
      i = j;
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

}  // namespace

std::string shorten_kernel_name(std::string_view demangled, size_t max_len) {
  std::string s(demangled);
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  s = strip_qualifiers(s);
  // Cut the parameter list: the first '(' outside template brackets that follows a name char
  // or '>' (a '(' right after '<' or ',' is a cast inside the template arguments).
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    if (s[i] == '>') --depth;
    if (s[i] == '(' && depth == 0 && i > 0 && (ident_char(s[i - 1]) || s[i - 1] == '>')) {
      s.resize(i);
      break;
    }
  }
  if (max_len >= 4 && s.size() > max_len) s = s.substr(0, max_len - 3) + "...";
  return s;
}

namespace {

// Length of the union of [start, end) intervals (sorted in place by start).
uint64_t union_ns(std::vector<std::pair<uint64_t, uint64_t>>& iv) {
  std::sort(iv.begin(), iv.end());
  uint64_t total = 0, cur_s = 0, cur_e = 0;
  bool open = false;
  for (const auto& [s, e] : iv) {
    if (!open || s > cur_e) {
      if (open) total += cur_e - cur_s;
      cur_s = s;
      cur_e = e;
      open = true;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (open) total += cur_e - cur_s;
  return total;
}

}  // namespace

Result<KernelProfile> aggregate_kernel_profile(const std::vector<KernelRecord>& recs,
                                               const KernelProfileInput& in, int64_t dropped) {
  GS_RETURN_IF_ERROR(in.validate());
  if (recs.empty()) {
    return NotFound("kernel profile: no kernel records were collected (CUPTI)");
  }
  KernelProfile p;
  p.in = in;
  p.records = static_cast<int64_t>(recs.size());
  p.dropped = dropped;
  const double u = static_cast<double>(in.units);
  // Per mangled name first (demangle once per distinct name), then per shortened name.
  std::unordered_map<std::string, std::pair<int64_t, uint64_t>> by_mangled;  // calls, ns
  std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> groups;     // graph launches
  std::vector<std::pair<uint64_t, uint64_t>> all;
  uint64_t sum_ns = 0;
  for (size_t i = 0; i < recs.size(); ++i) {
    const KernelRecord& r = recs[i];
    if (r.end_ns < r.start_ns) {
      return Corrupt("kernel profile: record " + std::to_string(i) + " (" + r.name +
                     ") ends before it starts");
    }
    auto& [calls, ns] = by_mangled[r.name];
    ++calls;
    ns += r.end_ns - r.start_ns;
    sum_ns += r.end_ns - r.start_ns;
    all.emplace_back(r.start_ns, r.end_ns);
    if (in.graph && r.graph_id != 0) groups[r.correlation].emplace_back(r.start_ns, r.end_ns);
  }
  std::map<std::string, std::pair<int64_t, uint64_t>> by_short;
  for (const auto& [name, cn] : by_mangled) {
    auto& [calls, ns] = by_short[shorten_kernel_name(demangle_kernel_name(name))];
    calls += cn.first;
    ns += cn.second;
  }
  for (const auto& [name, cn] : by_short) {
    KernelProfileRow row;
    row.name = name;
    row.calls = cn.first;
    row.calls_per_unit = static_cast<double>(cn.first) / u;
    row.us_per_unit = static_cast<double>(cn.second) * 1e-3 / u;
    row.mean_us = static_cast<double>(cn.second) * 1e-3 / static_cast<double>(cn.first);
    row.pct_of_wall = in.wall_us_per_unit > 0 ? 100.0 * row.us_per_unit / in.wall_us_per_unit : 0;
    p.rows.push_back(row);
  }
  std::stable_sort(p.rows.begin(), p.rows.end(),
                   [](const auto& a, const auto& b) { return a.us_per_unit > b.us_per_unit; });
  p.kernels_per_unit = static_cast<double>(recs.size()) / u;
  p.sum_us_per_unit = static_cast<double>(sum_ns) * 1e-3 / u;
  p.launch_groups = static_cast<int64_t>(groups.size());
  if (!groups.empty()) {  // per graph launch: mean busy and mean span
    double busy = 0, span = 0;
    for (auto& [id, iv] : groups) {
      uint64_t lo = UINT64_MAX, hi = 0;
      for (const auto& [s, e] : iv) {
        lo = std::min(lo, s);
        hi = std::max(hi, e);
      }
      span += static_cast<double>(hi - lo);
      busy += static_cast<double>(union_ns(iv));
    }
    const double g = static_cast<double>(groups.size());
    p.busy_us_per_unit = busy * 1e-3 / g;
    p.span_us_per_unit = span * 1e-3 / g;
  } else {  // whole trace / units (the span then includes host-side gaps between units)
    uint64_t lo = UINT64_MAX, hi = 0;
    for (const auto& [s, e] : all) {
      lo = std::min(lo, s);
      hi = std::max(hi, e);
    }
    p.span_us_per_unit = static_cast<double>(hi - lo) * 1e-3 / u;
    p.busy_us_per_unit = static_cast<double>(union_ns(all)) * 1e-3 / u;
  }
  return p;
}

std::string format_kernel_profile(const KernelProfile& p, const std::string& title) {
  std::string out = title + "\n";
  char buf[512];
  const std::string& u = p.in.unit;
  std::snprintf(buf, sizeof buf,
                "| kernel | calls/%s | us/%s | %% of %s | us/call |\n| --- | ---: | ---: | ---: | "
                "---: |\n",
                u.c_str(), u.c_str(), u.c_str());
  out += buf;
  for (const auto& r : p.rows) {
    std::snprintf(buf, sizeof buf, "| %s | %.2f | %.2f | %.1f%% | %.2f |\n", r.name.c_str(),
                  r.calls_per_unit, r.us_per_unit, r.pct_of_wall, r.mean_us);
    out += buf;
  }
  std::snprintf(buf, sizeof buf,
                "%.1f kernels per %s; per %s: sum of kernel times %.1f us, busy (union of "
                "kernel intervals) %.1f us, span (first start .. last end) %.1f us\n",
                p.kernels_per_unit, u.c_str(), u.c_str(), p.sum_us_per_unit, p.busy_us_per_unit,
                p.span_us_per_unit);
  out += buf;
  std::snprintf(buf, sizeof buf,
                "wall per %s: %.1f us (untraced), %.1f us (traced); wall - busy = %.1f us "
                "(no kernel running: launch gaps, drains, host)\n",
                u.c_str(), p.in.wall_us_per_unit, p.in.traced_wall_us_per_unit,
                p.in.wall_us_per_unit - p.busy_us_per_unit);
  out += buf;
  std::snprintf(buf, sizeof buf,
                "(%lld records over %lld %ss, %lld graph launches, %lld dropped; kernels "
                "overlapping under PDL make the sum exceed the busy time)\n",
                static_cast<long long>(p.records), static_cast<long long>(p.in.units), u.c_str(),
                static_cast<long long>(p.launch_groups), static_cast<long long>(p.dropped));
  out += buf;
  return out;
}

nlohmann::json kernel_profile_json(const KernelProfile& p) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : p.rows) {
    rows.push_back({{"kernel", r.name},
                    {"calls", r.calls},
                    {"calls_per_unit", r.calls_per_unit},
                    {"us_per_unit", r.us_per_unit},
                    {"pct_of_wall", r.pct_of_wall},
                    {"us_per_call", r.mean_us}});
  }
  return {{"unit", p.in.unit},
          {"units", p.in.units},
          {"graph", p.in.graph},
          {"records", p.records},
          {"dropped", p.dropped},
          {"graph_launches", p.launch_groups},
          {"kernels_per_unit", p.kernels_per_unit},
          {"kernel_sum_us_per_unit", p.sum_us_per_unit},
          {"busy_us_per_unit", p.busy_us_per_unit},
          {"span_us_per_unit", p.span_us_per_unit},
          {"wall_us_per_unit", p.in.wall_us_per_unit},
          {"traced_wall_us_per_unit", p.in.traced_wall_us_per_unit},
          {"kernels", rows}};
}

}  // namespace gossamer
