#pragma once
// libvirt's event loop implementation (virEventRegisterImpl) on straitd's
// EventLoop: handles are epoll watches, timeouts are timerfds, so libvirt's
// callbacks (keepalive, domain events) run on the control thread from
// EventLoop::run_once. Process-wide: libvirt takes one implementation, and
// it must be in place before the first connection is opened.
#include "control/daemon/event_loop.h"

namespace strait::ctl {

// The first call registers `loop` with libvirt for the rest of the process
// (libvirt cannot change implementations); later calls with the same loop
// do nothing, with another loop they are refused (false). The loop must
// outlive every libvirt connection.
bool install_libvirt_event_impl(EventLoop& loop);

}  // namespace strait::ctl
