// The statistics table (core/base/stats.h) against the list in include/keywatch.h, which is
// generated from it, and the table's lookup and histogram recording. Run with
// KW_STATS_WRITE_HEADER=1 to rewrite the header's list from the table after changing a row.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "core/base/stats.h"

namespace {

const char kBegin[] = " * KW_STATS_LIST_BEGIN\n";
const char kEnd[] = " * KW_STATS_LIST_END\n";

std::string read_file(const char *path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

TEST(StatsTable, HeaderListIsGeneratedFromTheTable) {
    std::string header = read_file(KW_HEADER_PATH);
    size_t begin = header.find(kBegin), end = header.find(kEnd);
    ASSERT_NE(begin, std::string::npos) << "no KW_STATS_LIST_BEGIN in " << KW_HEADER_PATH;
    ASSERT_NE(end, std::string::npos) << "no KW_STATS_LIST_END in " << KW_HEADER_PATH;
    begin += sizeof kBegin - 1;
    const std::string expected = keywatch::stats_header_list();
    if (std::getenv("KW_STATS_WRITE_HEADER")) {
        header.replace(begin, end - begin, expected);
        std::ofstream(KW_HEADER_PATH) << header;
        GTEST_SKIP() << "rewrote the list in " << KW_HEADER_PATH;
    }
    EXPECT_EQ(header.substr(begin, end - begin), expected)
        << "include/keywatch.h's statistics list differs from core/base/stats.h's table: run "
           "KW_STATS_WRITE_HEADER=1 build/tests/kw_unit_tests --gtest_filter='StatsTable.*'";
}

TEST(StatsTable, HeaderListNamesEveryRowOnceAndNothingElse) {
    // Independent of the generator: the first word of each list line is a row's name.
    std::string header = read_file(KW_HEADER_PATH);
    size_t begin = header.find(kBegin) + sizeof kBegin - 1, end = header.find(kEnd);
    std::istringstream lines(header.substr(begin, end - begin));
    std::multiset<std::string> listed;
    for (std::string line; std::getline(lines, line);) {
        std::istringstream words(line);
        std::string star, name, type;
        words >> star >> name >> type;
        if (type == "counter" || type == "gauge" || type == "histogram") listed.insert(name);
    }
    std::multiset<std::string> table;
    for (auto &row : keywatch::stat_table()) table.insert(row.name);
    EXPECT_EQ(listed, table);
}

TEST(StatsTable, LookupFindsRowsAndLabelledSamples) {
    keywatch::StatId id;
    std::string label;
    ASSERT_TRUE(keywatch::find_stat("handler.errors", &id, &label));
    EXPECT_EQ(id, keywatch::StatId::HANDLER_ERRORS);
    EXPECT_EQ(label, "");
    ASSERT_TRUE(keywatch::find_stat("handler.errors.2", &id, &label));
    EXPECT_EQ(id, keywatch::StatId::HANDLER_ERRORS_BY_HANDLER);
    EXPECT_EQ(label, "2");
    ASSERT_TRUE(keywatch::find_stat("node.state.127.0.0.1:6379", &id, &label));
    EXPECT_EQ(id, keywatch::StatId::NODE_STATE);
    EXPECT_EQ(label, "127.0.0.1:6379");
    EXPECT_FALSE(keywatch::find_stat("events.recieved", &id, &label));
    EXPECT_FALSE(keywatch::find_stat("queue.acked.", &id, &label));
    EXPECT_EQ(keywatch::stat_sample_name(keywatch::StatId::EXPIRY_LATENESS, "keys"),
              "expiry.lateness.keys");
    EXPECT_STREQ(keywatch::stat_info(keywatch::StatId::EXPIRY_LATENESS).label, "queue");
    EXPECT_STREQ(keywatch::stat_info(keywatch::StatId::SWEEP_CALLS).label, "");
}

TEST(StatsTable, HistogramBucketsObservations) {
    keywatch::Histogram h;
    h.observe_us(-5);          // counts as 0: first bucket
    h.observe_us(1000);        // exactly 1 ms: le 0.001
    h.observe_us(1001);        // just above: le 0.0025
    h.observe_us(90'000'000);  // 90 s: +Inf
    keywatch::HistogramSnapshot s = h.snapshot();
    EXPECT_EQ(s.count, 4u);
    EXPECT_EQ(s.buckets[0], 2u);
    EXPECT_EQ(s.buckets[1], 1u);
    EXPECT_EQ(s.buckets[keywatch::kHistogramBuckets - 1], 1u);
    EXPECT_NEAR(s.sum, 90.002001, 1e-9);
}

}  // namespace
