// A small JSON reader / writer for case headers (gsrender/testing/case.py writes them): objects,
// arrays, strings (with the escapes json.dumps emits for ASCII), numbers, true / false / null.
// Enough for the case format, not a general-purpose library.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace kdriver {

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool b = false;
  double num = 0.0;
  std::string str;
  std::vector<Json> arr;
  std::map<std::string, Json> obj;  // sorted keys: the writer's output is stable

  bool has(const std::string& k) const { return kind == kObject && obj.count(k) > 0; }
  const Json& at(const std::string& k) const {
    auto it = obj.find(k);
    if (kind != kObject || it == obj.end()) throw std::runtime_error("missing key '" + k + "'");
    return it->second;
  }
  double number() const {
    if (kind == kBool) return b ? 1.0 : 0.0;
    if (kind != kNumber) throw std::runtime_error("expected a number");
    return num;
  }
  bool boolean() const {
    if (kind == kBool) return b;
    if (kind == kNumber) return num != 0.0;
    throw std::runtime_error("expected a bool");
  }
  const std::string& string() const {
    if (kind != kString) throw std::runtime_error("expected a string");
    return str;
  }
  static Json of(double v) { Json j; j.kind = kNumber; j.num = v; return j; }
  static Json of(bool v) { Json j; j.kind = kBool; j.b = v; return j; }
  static Json of(const std::string& v) { Json j; j.kind = kString; j.str = v; return j; }
  static Json object() { Json j; j.kind = kObject; return j; }
  static Json array() { Json j; j.kind = kArray; return j; }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}
  Json parse() {
    Json v = value();
    ws();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  const std::string& s_;
  size_t i_ = 0;

  [[noreturn]] void fail(const char* what) const {
    throw std::runtime_error(std::string("JSON: ") + what + " at offset " + std::to_string(i_));
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail("unexpected character");
  }
  bool word(const char* w) {
    const std::string ws_(w);
    if (s_.compare(i_, ws_.size(), ws_) == 0) return i_ += ws_.size(), true;
    return false;
  }
  std::string string_body() {
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("bad escape");
      c = s_[i_++];
      switch (c) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {  // \uXXXX: kept as UTF-8 for the BMP (json.dumps escapes non-ASCII)
          if (i_ + 4 > s_.size()) fail("bad \\u escape");
          const unsigned cp = std::stoul(s_.substr(i_, 4), nullptr, 16);
          i_ += 4;
          if (cp < 0x80) {
            out += static_cast<char>(cp);
          } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          }
          break;
        }
        default: out += c;  // \" \\ \/
      }
    }
    if (i_ >= s_.size()) fail("unterminated string");
    ++i_;
    return out;
  }
  Json value() {
    ws();
    if (i_ >= s_.size()) fail("unexpected end");
    Json j;
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      j.kind = Json::kObject;
      if (eat('}')) return j;
      do {
        expect('"');
        const std::string k = string_body();
        expect(':');
        j.obj[k] = value();
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      ++i_;
      j.kind = Json::kArray;
      if (eat(']')) return j;
      do j.arr.push_back(value());
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      ++i_;
      j.kind = Json::kString;
      j.str = string_body();
    } else if (word("true")) {
      j.kind = Json::kBool, j.b = true;
    } else if (word("false")) {
      j.kind = Json::kBool, j.b = false;
    } else if (word("null")) {
      j.kind = Json::kNull;
    } else if (word("NaN") || word("Infinity") || word("-Infinity")) {
      fail("non-finite numbers are not allowed in a case header");
    } else {
      const char* begin = s_.c_str() + i_;
      char* end = nullptr;
      j.kind = Json::kNumber;
      j.num = std::strtod(begin, &end);
      if (end == begin) fail("bad value");
      i_ += static_cast<size_t>(end - begin);
    }
    return j;
  }
};

inline void write_string(std::string& out, const std::string& s) {
  out += '"';
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) out += ' ';
    else out += c;
  }
  out += '"';
}

inline void write_json(std::string& out, const Json& j, int indent = 0) {
  const std::string pad(indent, ' ');
  switch (j.kind) {
    case Json::kNull: out += "null"; break;
    case Json::kBool: out += j.b ? "true" : "false"; break;
    case Json::kNumber: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", j.num);
      out += buf;
      break;
    }
    case Json::kString: write_string(out, j.str); break;
    case Json::kArray: {
      out += '[';
      for (size_t k = 0; k < j.arr.size(); ++k) {
        if (k) out += ", ";
        write_json(out, j.arr[k], indent);
      }
      out += ']';
      break;
    }
    case Json::kObject: {
      out += "{";
      bool first = true;
      for (const auto& [k, v] : j.obj) {
        out += first ? "\n" : ",\n";
        first = false;
        out += pad + " ";
        write_string(out, k);
        out += ": ";
        write_json(out, v, indent + 1);
      }
      out += first ? "}" : "\n" + pad + "}";
      break;
    }
  }
}

}  // namespace kdriver
