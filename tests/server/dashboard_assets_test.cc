// The dashboard's embedded files: byte-for-byte the files they were made from, found by path.
#include "server/dashboard_assets.h"

#include <gtest/gtest.h>

#include "common/test_util.h"

namespace tarmac::server {
namespace {

TEST(DashboardAssetsTest, EmbedsThePageByteForByte) {
  for (const char* name : {"index.html", "dashboard.js", "dashboard.css"}) {
    const DashboardAsset* a = FindDashboardAsset(std::string("/dashboard/") + name);
    ASSERT_NE(a, nullptr) << name;
    EXPECT_EQ(a->body, tarmac::testing::Slurp(TARMAC_SOURCE_DIR "/src/server/dashboard/" + std::string(name))) << name;
  }
}

TEST(DashboardAssetsTest, EmbedsUplotFromNpm) {
  const DashboardAsset* js = FindDashboardAsset("/dashboard/uPlot.iife.min.js");
  ASSERT_NE(js, nullptr);
  EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(js->body.find("uPlot"), std::string_view::npos);
  EXPECT_EQ(js->body, tarmac::testing::Slurp(TARMAC_BINARY_DIR "/src/server/dashboard_npm/node_modules/uplot/dist/uPlot.iife.min.js"));
  ASSERT_NE(FindDashboardAsset("/dashboard/uPlot.min.css"), nullptr);
}

TEST(DashboardAssetsTest, MapsPaths) {
  ASSERT_NE(FindDashboardAsset("/dashboard"), nullptr);
  EXPECT_EQ(FindDashboardAsset("/dashboard")->name, "index.html");
  EXPECT_EQ(FindDashboardAsset("/dashboard/")->name, "index.html");
  EXPECT_EQ(FindDashboardAsset("/dashboard/index.html")->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(FindDashboardAsset("/dashboardx"), nullptr);
  EXPECT_EQ(FindDashboardAsset("/dashboard/nope.js"), nullptr);
  EXPECT_EQ(FindDashboardAsset("/dashboard/../metrics"), nullptr);
  EXPECT_EQ(FindDashboardAsset("/metrics"), nullptr);
}

}  // namespace
}  // namespace tarmac::server
