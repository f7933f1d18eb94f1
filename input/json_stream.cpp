// SAX-driven skeleton and element streaming (see json_stream.hpp).
#include "input/json_stream.hpp"

#include <fstream>
#include <vector>

#include "cost_model/input_error.hpp"

namespace kvshift::input {
namespace {

/// Builds a DOM from SAX events (stable slots: only the innermost open container grows).
class DomBuilder {
 public:
  template <class V>
  void value(V&& v) {
    place(Json(std::forward<V>(v)));
  }
  void open(Json empty) { stack_.push_back(place(std::move(empty))); }
  void key(const std::string& k) { slot_ = &(*stack_.back())[k]; }
  void close() { stack_.pop_back(); }
  bool done() const { return stack_.empty(); }
  Json& result() { return root_; }

 private:
  Json* place(Json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    *slot_ = std::move(v);
    return slot_;
  }

  Json root_;
  std::vector<Json*> stack_;
  Json* slot_ = nullptr;
};

/// One pass: either the skeleton (everything but the array's elements) or the elements.
class Splitter : public nlohmann::json_sax<Json> {
 public:
  using Fn = std::function<void(const Json&, std::size_t)>;
  Splitter(std::string_view key, const Fn* elements) : key_(key), elements_(elements) {}

  bool null() override { return scalar(nullptr); }
  bool boolean(bool v) override { return scalar(v); }
  bool number_integer(number_integer_t v) override { return scalar(v); }
  bool number_unsigned(number_unsigned_t v) override { return scalar(v); }
  bool number_float(number_float_t v, const string_t&) override { return scalar(v); }
  bool string(string_t& v) override { return scalar(v); }
  bool binary(binary_t& v) override { return scalar(Json::binary(v)); }
  bool start_object(std::size_t) override { return open(Json::object()); }
  bool start_array(std::size_t) override {
    if (depth_ == 1 && root_key_ == key_ && root_is_object_) {
      in_array_ = true;  // the streamed array: its elements are at depth 2
      index_ = 0;
      if (!elements_) skeleton_.open(Json::array());
      ++depth_;
      return true;
    }
    return open(Json::array());
  }
  bool key(string_t& k) override {
    if (depth_ == 1) root_key_ = k;
    if (DomBuilder* b = builder()) b->key(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool end_array() override {
    if (in_array_ && depth_ == 2) {
      in_array_ = false;
      if (!elements_) skeleton_.close();
      --depth_;
      return true;
    }
    return close();
  }
  bool parse_error(std::size_t byte, const std::string&,
                   const nlohmann::detail::exception& e) override {
    error_ = "not valid JSON at byte " + std::to_string(byte) + ": " + e.what();
    return false;
  }
  const std::string& error() const { return error_; }
  Json& skeleton() { return skeleton_.result(); }
  std::size_t elements() const { return index_; }

 private:
  /// Where the current event goes: the skeleton, the element being built, or nowhere.
  DomBuilder* builder() {
    if (in_array_) return elements_ ? &element_ : nullptr;
    return elements_ ? nullptr : &skeleton_;
  }
  template <class V>
  bool scalar(V&& v) {
    if (DomBuilder* b = builder()) b->value(std::forward<V>(v));
    if (in_array_ && depth_ == 2) element_done();
    return true;
  }
  bool open(Json empty) {
    if (depth_ == 0) root_is_object_ = empty.is_object();
    if (DomBuilder* b = builder()) b->open(std::move(empty));
    ++depth_;
    return true;
  }
  bool close() {
    if (DomBuilder* b = builder()) b->close();
    --depth_;
    if (in_array_ && depth_ == 2) element_done();
    return true;
  }
  void element_done() {
    if (elements_) {
      (*elements_)(element_.result(), index_);
      element_ = DomBuilder{};
    }
    ++index_;
  }

  std::string key_;
  const Fn* elements_;
  DomBuilder skeleton_, element_;
  std::string root_key_, error_;
  std::size_t depth_ = 0, index_ = 0;
  bool in_array_ = false, root_is_object_ = false;
};

void run(const std::string& path, Splitter& s) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open file");
  bool ok = false;
  try {
    ok = Json::sax_parse(in, &s);
  } catch (const Json::exception& e) {  // e.g. a number too large for a double
    throw InputError(path + ": not valid JSON: " + e.what());
  }
  if (in.bad()) throw InputError(path + ": cannot read file");
  if (!ok) throw InputError(path + ": " + s.error());
}

}  // namespace

Json read_json_skeleton(const std::string& path, std::string_view key, std::size_t* elements) {
  Splitter s(key, nullptr);
  run(path, s);
  if (elements) *elements = s.elements();
  return std::move(s.skeleton());
}

void stream_json_array(const std::string& path, std::string_view key,
                       const std::function<void(const Json&, std::size_t)>& fn) {
  Splitter s(key, &fn);
  run(path, s);
}

}  // namespace kvshift::input
