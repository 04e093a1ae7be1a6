//! What one batch of the writer has read of endpoints: each row read once a batch, not once a
//! job.
//!
//! Every publish reads its application's subscribers, every delivery handed off or claimed its
//! endpoint's row, and every success ends its endpoint's failure streak (an update that finds
//! none almost always); the jobs of a busy writer's batch do so for the same few endpoints
//! again and again.
//! Within a batch (one transaction of the one writer: no other connection writes meanwhile)
//! those rows change only if a job of the batch writes `endpoints`. SQLite's update hook reports
//! every such write (`endpoints` is a rowid table, whose changes the hook sees), and the rows
//! read are then forgotten; so they are at each batch's start and whenever the writer undoes a
//! job's writes, which rows read since may have seen.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use hookd_core::model::Endpoint;
use rusqlite::Connection;
use rusqlite::hooks::Action;

use crate::StoreError;
use crate::sql::messages::Subscriber;

/// Set when the connection has written a row of `endpoints`; see [`watch_endpoints`].
pub(super) type EndpointsWritten = Arc<AtomicBool>;

/// Has SQLite tell when `conn` writes a row of `endpoints` (insert, update, delete, or a delete
/// cascading from its application).
pub(super) fn watch_endpoints(conn: &Connection) -> rusqlite::Result<EndpointsWritten> {
    let written = EndpointsWritten::default();
    let flag = Arc::clone(&written);
    conn.update_hook(Some(move |_: Action, _: &str, table: &str, _: i64| {
        if table == "endpoints" {
            flag.store(true, Relaxed);
        }
    }))?;
    Ok(written)
}

/// The rows of `endpoints` the current batch has read, by application and by id (hashed with
/// foldhash: the keys are hookd's own random ids, looked up for every write of a batch).
pub(super) struct BatchReads {
    written: EndpointsWritten,
    subscribers: RefCell<foldhash::HashMap<String, Rc<[Subscriber]>>>,
    endpoints: RefCell<foldhash::HashMap<String, Option<Endpoint>>>,
    /// Endpoints without a failure streak (`failing_since` NULL).
    unbroken: RefCell<foldhash::HashSet<String>>,
}

impl BatchReads {
    pub(super) fn new(written: EndpointsWritten) -> Self {
        Self {
            written,
            subscribers: RefCell::default(),
            endpoints: RefCell::default(),
            unbroken: RefCell::default(),
        }
    }

    /// Forgets every row read.
    pub(super) fn forget(&self) {
        self.written.store(false, Relaxed);
        self.subscribers.borrow_mut().clear();
        self.endpoints.borrow_mut().clear();
        self.unbroken.borrow_mut().clear();
    }

    /// Forgets every row read if `endpoints` was written since they were read.
    fn check(&self) {
        if self.written.load(Relaxed) {
            self.forget();
        }
    }

    /// The subscribers of application `app`, read with `read` unless read in this batch.
    pub(super) fn subscribers(
        &self,
        app: &str,
        read: impl FnOnce() -> Result<Vec<Subscriber>, StoreError>,
    ) -> Result<Rc<[Subscriber]>, StoreError> {
        self.check();
        if let Some(known) = self.subscribers.borrow().get(app) {
            return Ok(Rc::clone(known));
        }
        let read: Rc<[Subscriber]> = read()?.into();
        let mut subscribers = self.subscribers.borrow_mut();
        subscribers.insert(app.to_owned(), Rc::clone(&read));
        Ok(read)
    }

    /// The endpoint `id` (`None`: there is none), read with `read` unless read in this batch.
    pub(super) fn endpoint(
        &self,
        id: &str,
        read: impl FnOnce() -> Result<Option<Endpoint>, StoreError>,
    ) -> Result<Option<Endpoint>, StoreError> {
        self.check();
        if let Some(known) = self.endpoints.borrow().get(id) {
            return Ok(known.clone());
        }
        let read = read()?;
        let mut endpoints = self.endpoints.borrow_mut();
        endpoints.insert(id.to_owned(), read.clone());
        Ok(read)
    }

    /// Ends endpoint `id`'s failure streak with `end` (which sets its `failing_since` NULL)
    /// unless this batch has done so already.
    pub(super) fn end_streak(
        &self,
        id: &str,
        end: impl FnOnce() -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.check();
        if self.unbroken.borrow().contains(id) {
            return Ok(());
        }
        end()?;
        // `end` may have written the row: what else was read of endpoints goes, not this.
        self.check();
        self.unbroken.borrow_mut().insert(id.to_owned());
        Ok(())
    }
}
