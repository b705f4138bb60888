#include <evodispatch/results/devices.hpp>

#include "access.hpp"
#include "codec.hpp"

namespace evodispatch::results {

namespace {
constexpr const char* kDeviceSelect =
    "SELECT id, fingerprint, name, num_sms, l2_bytes, mem_bw, cc, driver, info_json, created_at FROM devices";

constexpr std::string_view kUpsertColumns[] = {"fingerprint", "name", "num_sms", "l2_bytes",
                                               "mem_bw",      "cc",   "driver",  "info_json"};

DeviceRecord read_device(const sql::Statement& st) {
  DeviceRecord r;
  r.id = st.column_int64(0);
  r.fingerprint = st.column_text(1);
  r.info.name = st.column_text(2);
  r.info.num_sms = st.column_int(3);
  r.info.l2_bytes = st.column_int64(4);
  r.info.mem_bw_bytes_per_s = st.column_double(5);
  r.info.cc = st.column_int(6);
  r.driver = st.column_text(7);
  r.extra = detail::read_json(st, 8);
  r.created_at = st.column_text(9);
  return r;
}
}  // namespace

std::int64_t Devices::upsert(const DeviceRecord& r) {
  if (r.fingerprint.empty()) throw std::invalid_argument("Devices::upsert: empty fingerprint");
  sql::Statement st(detail::connection(*db_),
                    sql::insert_into("devices", kUpsertColumns) +
                        " ON CONFLICT (fingerprint) DO UPDATE SET name = excluded.name, num_sms = excluded.num_sms, "
                        "l2_bytes = excluded.l2_bytes, mem_bw = excluded.mem_bw, cc = excluded.cc, "
                        "driver = excluded.driver, info_json = excluded.info_json RETURNING id");
  st.bind(":fingerprint", r.fingerprint)
      .bind(":name", r.info.name)
      .bind(":num_sms", r.info.num_sms)
      .bind(":l2_bytes", r.info.l2_bytes)
      .bind(":mem_bw", r.info.mem_bw_bytes_per_s)
      .bind(":cc", r.info.cc)
      .bind(":driver", r.driver)
      .bind(":info_json", detail::json_text(r.extra.is_null() ? nlohmann::json::object() : r.extra));
  if (auto id = detail::insert_returning_id(st)) return *id;
  throw DbError("upsert of device " + r.fingerprint + " returned no id", st.sql());
}

std::optional<DeviceRecord> Devices::find(const std::string& fingerprint) const {
  sql::Statement st(detail::connection(*db_), std::string(kDeviceSelect) + " WHERE fingerprint = :fingerprint");
  st.bind(":fingerprint", fingerprint);
  if (st.step()) return read_device(st);
  return std::nullopt;
}

std::optional<DeviceRecord> Devices::get(std::int64_t id) const {
  sql::Statement st(detail::connection(*db_), std::string(kDeviceSelect) + " WHERE id = :id");
  st.bind(":id", id);
  if (st.step()) return read_device(st);
  return std::nullopt;
}

std::vector<DeviceRecord> Devices::list() const {
  sql::Statement st(detail::connection(*db_), std::string(kDeviceSelect) + " ORDER BY id");
  std::vector<DeviceRecord> out;
  while (st.step()) out.push_back(read_device(st));
  return out;
}

}  // namespace evodispatch::results
