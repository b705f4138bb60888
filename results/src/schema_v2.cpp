// Schema version 2: the base policy a search program embeds is stored once.
//
//   program_bases  texts many programs share (a search's base policy, e.g. FA3's
//                  heuristic, ~7 KB), unique by content
//   programs       + base_id: the program's source is `source` with that text put back
//                  (ProgramRecord::base); NULL for programs stored whole (all of v1's)
//
// A 40 000-program search stored its base 40 000 times in v1 (~350 MB); now once.
#include "schema.hpp"

namespace evodispatch::results {

namespace {
constexpr std::string_view kV2 = R"sql(
CREATE TABLE program_bases (
  id    INTEGER PRIMARY KEY,
  text  TEXT    NOT NULL UNIQUE
);
ALTER TABLE programs ADD COLUMN base_id INTEGER REFERENCES program_bases(id);
)sql";
}  // namespace

std::string_view schema_v2() { return kV2; }

}  // namespace evodispatch::results
