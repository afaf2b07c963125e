// Reads and writes case folders (the format of gsrender/testing/case.py: case.json + raw
// little-endian arrays). Host-only C++; no CUDA, no torch.
#pragma once
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "json.h"

namespace kdriver {

namespace fs = std::filesystem;

inline size_t dtype_size(const std::string& dt) {
  if (dt == "float32" || dt == "int32") return 4;
  if (dt == "float64" || dt == "int64") return 8;
  if (dt == "uint8") return 1;
  throw std::runtime_error("unknown dtype '" + dt + "'");
}

struct Array {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<char> bytes;

  int64_t numel() const {
    int64_t n = 1;
    for (const int64_t s : shape) n *= s;
    return n;
  }
  int64_t dim(int i) const {
    if (i < 0) i += static_cast<int>(shape.size());
    if (i < 0 || i >= static_cast<int>(shape.size())) throw std::runtime_error("bad dim");
    return shape[i];
  }
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(bytes.data()); }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(bytes.data()); }
  static Array make(const std::string& dtype, std::vector<int64_t> shape) {
    Array a{dtype, std::move(shape), {}};
    a.bytes.assign(static_cast<size_t>(a.numel()) * dtype_size(dtype), 0);
    return a;
  }
};

using Arrays = std::map<std::string, Array>;

struct Case {
  fs::path dir;
  Json header;
  Arrays inputs, expected;

  const std::string& name() const { return header.at("name").string(); }
  const std::string& kernel() const { return header.at("kernel").string(); }
  const std::string& precision() const { return header.at("precision").string(); }
  const Json& params() const { return header.at("params"); }
  double num(const std::string& k) const { return params().at(k).number(); }
  bool flag(const std::string& k) const { return params().at(k).boolean(); }
  const Array& in(const std::string& k) const {
    auto it = inputs.find(k);
    if (it == inputs.end()) throw std::runtime_error("case has no input '" + k + "'");
    return it->second;
  }
  const Array* in_opt(const std::string& k) const {
    auto it = inputs.find(k);
    return it == inputs.end() ? nullptr : &it->second;
  }
};

inline std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + p.string());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline Arrays read_section(const fs::path& dir, const Json& header, const std::string& section) {
  Arrays out;
  if (!header.has(section)) return out;
  for (const auto& [name, e] : header.at(section).obj) {
    std::vector<int64_t> shape;
    for (const Json& s : e.at("shape").arr) shape.push_back(static_cast<int64_t>(s.number()));
    Array a = Array::make(e.at("dtype").string(), shape);
    const fs::path p = dir / e.at("file").string();
    std::ifstream f(p, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + p.string());
    f.read(a.bytes.data(), static_cast<std::streamsize>(a.bytes.size()));
    if (static_cast<size_t>(f.gcount()) != a.bytes.size() || f.peek() != EOF)
      throw std::runtime_error(p.string() + ": size does not match its shape");
    out.emplace(name, std::move(a));
  }
  return out;
}

inline Case read_case(const fs::path& dir) {
  Case c;
  c.dir = dir;
  c.header = JsonParser(read_text(dir / "case.json")).parse();
  if (c.header.at("format").string() != "gsrender-case" || c.header.at("version").number() != 1)
    throw std::runtime_error(dir.string() + ": not a gsrender-case v1 header");
  c.inputs = read_section(dir, c.header, "inputs");
  c.expected = read_section(dir, c.header, "expected");
  return c;
}

// Writes a result case: the source case's identity and params, `outputs` and `meta`.
inline void write_result(const fs::path& dir, const Case& src, const Arrays& outputs,
                         const Json& meta) {
  fs::create_directories(dir / "outputs");
  Json h = Json::object();
  for (const char* k : {"format", "version", "name", "kernel", "precision", "params"})
    h.obj[k] = src.header.at(k);
  h.obj["compare"] = Json::object();
  h.obj["meta"] = meta;
  Json sec = Json::object();
  for (const auto& [name, a] : outputs) {
    const std::string rel = "outputs/" + name + ".bin";
    std::ofstream f(dir / rel, std::ios::binary);
    f.write(a.bytes.data(), static_cast<std::streamsize>(a.bytes.size()));
    if (!f) throw std::runtime_error("cannot write " + (dir / rel).string());
    Json e = Json::object();
    e.obj["dtype"] = Json::of(a.dtype);
    Json shape = Json::array();
    for (const int64_t s : a.shape) shape.arr.push_back(Json::of(static_cast<double>(s)));
    e.obj["shape"] = shape;
    e.obj["file"] = Json::of(rel);
    sec.obj[name] = e;
  }
  h.obj["outputs"] = sec;
  std::string text;
  write_json(text, h);
  text += "\n";
  const fs::path tmp = dir / "case.json.tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    if (!f) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, dir / "case.json");
}

}  // namespace kdriver
