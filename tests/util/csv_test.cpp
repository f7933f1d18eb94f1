// CSV fields and records: quotes, commas, line ends inside fields, empty fields.
#include "util/csv.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace kvshift::util {
namespace {

using Fields = std::vector<std::string>;

TEST(Csv, AFieldIsQuotedOnlyWhenItMustBe) {
  EXPECT_EQ(csv_escape("gpu0"), "gpu0");
  EXPECT_EQ(csv_escape(""), "");
  EXPECT_EQ(csv_escape("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_escape("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_escape("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_escape("cr\r"), "\"cr\r\"");
}

TEST(Csv, ARowEscapesEachFieldAndKeepsEmptyOnes) {
  EXPECT_EQ(csv_row({"a", "", "b,c", "d\"e"}), "a,,\"b,c\",\"d\"\"e\"");
  EXPECT_EQ(csv_row({"", ""}), ",");
  EXPECT_EQ(csv_row({}), "");
}

TEST(Csv, FieldsUndoTheQuotes) {
  EXPECT_EQ(csv_fields("a,,\"b,c\","), (Fields{"a", "", "b,c", ""}));
  EXPECT_EQ(csv_fields(""), (Fields{""}));
  EXPECT_EQ(csv_fields(","), (Fields{"", ""}));
  EXPECT_EQ(csv_fields("\"\""), (Fields{""}));
  EXPECT_EQ(csv_fields("\"x\"\"y\",z"), (Fields{"x\"y", "z"}));
  EXPECT_EQ(csv_fields("\"two\nlines\",x"), (Fields{"two\nlines", "x"}));
}

TEST(Csv, EveryFieldSurvivesARoundTrip) {
  const Fields f{"plain", "", "comma,", "\"quoted\"", "line\nend", "cr\r", ",\"\n"};
  EXPECT_EQ(csv_fields(csv_row(f)), f);
}

TEST(Csv, ARecordContinuesOverLineEndsInsideQuotes) {
  std::istringstream in("h1,h2\n\"two\nlines\",x\n\nlast,\n");
  Fields r;
  ASSERT_TRUE(read_csv_record(in, r));
  EXPECT_EQ(r, (Fields{"h1", "h2"}));
  ASSERT_TRUE(read_csv_record(in, r));
  EXPECT_EQ(r, (Fields{"two\nlines", "x"}));
  ASSERT_TRUE(read_csv_record(in, r));
  EXPECT_EQ(r, (Fields{""}));  // an empty line
  ASSERT_TRUE(read_csv_record(in, r));
  EXPECT_EQ(r, (Fields{"last", ""}));
  EXPECT_FALSE(read_csv_record(in, r));
  EXPECT_TRUE(r.empty());
}

TEST(Csv, AnUnclosedQuoteRunsToTheEndOfTheInput) {
  std::istringstream in("\"open,\nstill\n");
  Fields r;
  ASSERT_TRUE(read_csv_record(in, r));
  EXPECT_EQ(r, (Fields{"open,\nstill"}));
  EXPECT_FALSE(read_csv_record(in, r));
}

}  // namespace
}  // namespace kvshift::util
