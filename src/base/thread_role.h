// Which thread is the server's I/O thread. The server marks its event-loop thread once; lower
// layers (the router's Prepare, which renders templates and encodes prompts) assert they are not
// on it, without knowing any server. Work the server judged cheap enough to run inline (a small
// body, no grammar) runs inside an InlineWorkScope, where the assertion holds too.
//
// Thread-local state only: every function is thread-safe and reads or writes the caller's own.
#pragma once

namespace tarmac {

// Marks the calling thread as an I/O thread (for the rest of its life).
void MarkIoThread();
// Whether the calling thread is a marked I/O thread outside any InlineWorkScope: costly work
// here stalls every connection.
bool OnIoThread();

// Lets an I/O thread do preparation work it judged cheap, for the scope's lifetime (nests).
class InlineWorkScope {
 public:
  InlineWorkScope();
  ~InlineWorkScope();
  InlineWorkScope(const InlineWorkScope&) = delete;
  InlineWorkScope& operator=(const InlineWorkScope&) = delete;
};

}  // namespace tarmac
