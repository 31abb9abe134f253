// oplog: lists and decodes driving-message logs (plain, .zst or .bz2; openpilot's rlogs too).
//
//   oplog list LOG      one line per message: logMonoTime, service, size in bytes
//   oplog decode LOG    each message in Cap'n Proto's text form, one per line
//   oplog decode --pretty LOG    the same, indented over several lines
//
// The exit status is 0 when every message was read, 1 on an error, 2 for a log cut short (the
// messages before the cut are still printed).
#include <capnp/pretty-print.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "drive/log_io.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: oplog list LOG\n"
               "       oplog decode [--pretty] LOG\n");
  return 1;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 3)
    return Usage();
  const std::string command = argv[1];
  bool pretty = false;
  int arg = 2;
  if (command == "decode" && std::strcmp(argv[arg], "--pretty") == 0) {
    pretty = true;
    arg++;
  }
  if ((command != "list" && command != "decode") || arg != argc - 1)
    return Usage();
  const std::string path = argv[arg];

  auto log = op::drive::ReadLog(path);
  if (!log.ok()) {
    std::fprintf(stderr, "oplog: %s\n", log.status().ToString().c_str());
    return 1;
  }
  op::Status st = op::drive::VisitEvents(*log, [&](size_t index, op::msg::Event::Reader event) {
    if (command == "list") {
      std::printf("%llu %s %zu\n", static_cast<unsigned long long>(event.getLogMonoTime()),
                  op::drive::EventServiceName(event).c_str(),
                  log->messages[index].size() * sizeof(capnp::word));
    } else if (pretty) {
      std::printf("%s\n", capnp::prettyPrint(event).flatten().cStr());
    } else {
      std::printf("%s\n", kj::str(event).cStr());
    }
  });
  if (!st.ok()) {
    std::fprintf(stderr, "oplog: %s: %s\n", path.c_str(), st.message().c_str());
    return 1;
  }
  if (log->truncated) {
    std::fprintf(stderr, "oplog: %s: the log is cut short after %zu whole messages\n", path.c_str(),
                 log->messages.size());
    return 2;
  }
  return 0;
}
