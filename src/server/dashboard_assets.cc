#include "server/dashboard_assets.h"

namespace tarmac::server {

const DashboardAsset* FindDashboardAsset(std::string_view path) {
  constexpr std::string_view kPrefix = "/dashboard";
  if (path.substr(0, kPrefix.size()) != kPrefix) return nullptr;
  std::string_view rest = path.substr(kPrefix.size());
  std::string_view name;
  if (rest.empty() || rest == "/") {
    name = "index.html";
  } else if (rest[0] == '/') {
    name = rest.substr(1);
  } else {
    return nullptr;  // "/dashboardX"
  }
  for (const DashboardAsset& a : DashboardAssets())
    if (a.name == name) return &a;
  return nullptr;
}

}  // namespace tarmac::server
