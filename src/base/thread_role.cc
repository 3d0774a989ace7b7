#include "base/thread_role.h"

namespace tarmac {
namespace {

thread_local bool t_io_thread = false;
thread_local int t_inline_depth = 0;

}  // namespace

void MarkIoThread() { t_io_thread = true; }

bool OnIoThread() { return t_io_thread && t_inline_depth == 0; }

InlineWorkScope::InlineWorkScope() { ++t_inline_depth; }
InlineWorkScope::~InlineWorkScope() { --t_inline_depth; }

}  // namespace tarmac
