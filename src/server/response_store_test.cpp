// ResponseStore: LRU by count and by bytes, refresh on get, replace, erase, oversize entries.
#include "server/response_store.h"

#include <gtest/gtest.h>

namespace gossamer::server {
namespace {

StoredResponse entry(const std::string& text) {
  return StoredResponse{json{{"id", "x"}, {"text", text}}, json::array({text})};
}

TEST(ResponseStore, EvictsLeastRecentlyUsedByCount) {
  ResponseStore s(3, 1 << 20);
  for (const char* id : {"a", "b", "c"}) EXPECT_TRUE(s.put(id, entry(id)));
  ASSERT_TRUE(s.get("a").has_value());  // a is now the most recent
  EXPECT_TRUE(s.put("d", entry("d")));  // evicts b
  EXPECT_EQ(s.size(), 3);
  EXPECT_FALSE(s.get("b").has_value());
  for (const char* id : {"a", "c", "d"}) EXPECT_TRUE(s.get(id).has_value()) << id;
  EXPECT_EQ(s.get("c")->response["text"], "c");
}

TEST(ResponseStore, EvictsByBytesAndRejectsOversize) {
  const std::string big(1000, 'x');
  const int64_t one =
      static_cast<int64_t>(dump(entry(big).response).size() + dump(entry(big).input).size());
  ResponseStore s(100, 2 * one + one / 2);  // room for two
  EXPECT_TRUE(s.put("a", entry(big)));
  EXPECT_TRUE(s.put("b", entry(big)));
  EXPECT_EQ(s.bytes(), 2 * one);
  EXPECT_TRUE(s.put("c", entry(big)));
  EXPECT_FALSE(s.get("a").has_value());
  EXPECT_EQ(s.size(), 2);
  EXPECT_FALSE(s.put("huge", entry(std::string(3 * one, 'y'))));
  EXPECT_FALSE(s.get("huge").has_value());
  EXPECT_EQ(s.size(), 2);
}

TEST(ResponseStore, ReplaceEraseAndDisabled) {
  ResponseStore s(4, 1 << 20);
  s.put("a", entry("1"));
  s.put("a", entry("2"));
  EXPECT_EQ(s.size(), 1);
  EXPECT_EQ(s.get("a")->input[0], "2");
  EXPECT_TRUE(s.erase("a"));
  EXPECT_FALSE(s.erase("a"));
  EXPECT_EQ(s.size(), 0);
  EXPECT_EQ(s.bytes(), 0);
  ResponseStore off(0, 1 << 20);
  EXPECT_FALSE(off.put("a", entry("1")));
  EXPECT_FALSE(off.get("a").has_value());
}

}  // namespace
}  // namespace gossamer::server
